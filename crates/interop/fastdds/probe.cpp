// partita-fastdds-probe: a Fast DDS 2.9 program, with fastddsgen's type support, for partita's
// interoperability tests. Its network configuration is the XML profile FASTRTPS_DEFAULT_PROFILES_FILE names
// (partita's tests and partitions always give one: loopback or a V-NIC, no multicast).
//
//   partita-fastdds-probe pub DOMAIN TOPIC [--keyless] [--wait-readers N] [--linger SECONDS] [--dispose ID] [--unregister ID]
//       writes ids 1..3 twice each (seq 1, 2; text "fast-ID-SEQ"), then disposes id 2 and unregisters id 3 (or the ids
//       --dispose and --unregister name)
//       (keyed; its writer does not autodispose), reliable, transient-local, keep-all, the n-th of these 8
//       writes with the source timestamp 1700000000 s + n ms; with --wait-readers it
//       first waits for N matched readers, else it writes at once; then stays LINGER seconds (default 10) so
//       late joiners get its history, and exits. Prints `{"event":"written",...}` when done writing.
//   partita-fastdds-probe sub DOMAIN TOPIC [--keyless] [--seconds S] [--dispose ID] [--unregister ID]
//       reads (reliable, transient-local, keep-all) and prints one JSON line per sample:
//       {"id":1,"seq":1,"text":"..","valid":true,"state":"alive","ts":NS} (id absent for keyless), and for
//       a key-only sample {"id":2,"valid":false,"state":"disposed"|"no_writers","ts":NS} (keyed lines also carry the
//       sample's instance handle, "handle":"HEX"); exits 0 once it has the 6 samples and (keyed) instance 2 (--dispose)
//       disposed and instance 3 (--unregister) without writers, 1 when S seconds (default 20) pass first.
#include "partita_interop.h"
#include "partita_interopPubSubTypes.h"

#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/Topic.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

using namespace eprosima::fastdds::dds;
using partita::interop::KeyedSample;
using partita::interop::PlainSample;
using partita::interop::KeyedSamplePubSubType;
using partita::interop::PlainSamplePubSubType;

namespace {

struct Args {
    std::string role;
    int domain = 0;
    std::string topic;
    bool keyless = false;
    int wait_readers = 0;
    double linger = 10.0;
    double seconds = 20.0;
    int dispose = 2;
    int unregister = 3;
};

int usage(const char* why)
{
    std::fprintf(stderr, "partita-fastdds-probe: %s\nusage: partita-fastdds-probe pub|sub DOMAIN TOPIC [--keyless] "
            "[--wait-readers N] [--linger S] [--seconds S] [--dispose ID] [--unregister ID]\n", why);
    return 2;
}

bool parse(int argc, char** argv, Args& a)
{
    if (argc < 4)
    {
        return false;
    }
    a.role = argv[1];
    a.domain = std::atoi(argv[2]);
    a.topic = argv[3];
    for (int i = 4; i < argc; ++i)
    {
        std::string k = argv[i];
        bool has_value = i + 1 < argc;
        if (k == "--keyless")
        {
            a.keyless = true;
        }
        else if (k == "--wait-readers" && has_value)
        {
            a.wait_readers = std::atoi(argv[++i]);
        }
        else if (k == "--linger" && has_value)
        {
            a.linger = std::atof(argv[++i]);
        }
        else if (k == "--seconds" && has_value)
        {
            a.seconds = std::atof(argv[++i]);
        }
        else if (k == "--dispose" && has_value)
        {
            a.dispose = std::atoi(argv[++i]);
        }
        else if (k == "--unregister" && has_value)
        {
            a.unregister = std::atoi(argv[++i]);
        }
        else
        {
            return false;
        }
    }
    return (a.role == "pub" || a.role == "sub") && a.domain >= 0 && a.domain <= 232;
}

const char* state_name(InstanceStateKind s)
{
    switch (s)
    {
        case ALIVE_INSTANCE_STATE: return "alive";
        case NOT_ALIVE_DISPOSED_INSTANCE_STATE: return "disposed";
        default: return "no_writers";
    }
}

// The source timestamp of the n-th write (samples 1..6, then the dispose 7 and the unregister 8): fixed, so that a
// subscriber can tell the publisher's own timestamps from ones stamped on the way.
eprosima::fastrtps::Time_t stamp(int n)
{
    return eprosima::fastrtps::Time_t(1700000000, static_cast<uint32_t>(n) * 1000000u);
}

long long ns_of(const eprosima::fastrtps::rtps::Time_t& t)
{
    return static_cast<long long>(t.seconds()) * 1000000000LL + static_cast<long long>(t.nanosec());
}

std::string json_string(const std::string& s)
{
    std::string out = "\"";
    for (char c : s)
    {
        if (c == '"' || c == '\\')
        {
            out += '\\';
        }
        out += c;
    }
    return out + "\"";
}

std::string hex(const InstanceHandle_t& h)
{
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < 16; ++i)
    {
        unsigned b = h.value[i];
        out += digits[(b >> 4) & 0xf];
        out += digits[b & 0xf];
    }
    return out;
}

template<typename Type, typename Sample>
int publish(DomainParticipant* dp, const Args& a)
{
    TypeSupport type(new Type());
    type.register_type(dp);
    Topic* topic = dp->create_topic(a.topic, type.get_type_name(), TOPIC_QOS_DEFAULT);
    Publisher* pub = dp->create_publisher(PUBLISHER_QOS_DEFAULT);
    DataWriterQos q = DATAWRITER_QOS_DEFAULT;
    q.reliability().kind = RELIABLE_RELIABILITY_QOS;
    q.durability().kind = TRANSIENT_LOCAL_DURABILITY_QOS;
    q.history().kind = KEEP_ALL_HISTORY_QOS;
    q.writer_data_lifecycle().autodispose_unregistered_instances = false;
    DataWriter* w = pub->create_datawriter(topic, q);
    if (w == nullptr)
    {
        std::fprintf(stderr, "partita-fastdds-probe: no writer\n");
        return 1;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (a.wait_readers > 0)
    {
        PublicationMatchedStatus st;
        w->get_publication_matched_status(st);
        if (st.current_count >= a.wait_readers)
        {
            break;
        }
        if (std::chrono::steady_clock::now() > deadline)
        {
            std::fprintf(stderr, "partita-fastdds-probe: no %d matched readers within 30 s\n", a.wait_readers);
            return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    int written = 0;
    for (int id = 1; id <= 3; ++id)
    {
        for (int seq = 1; seq <= 2; ++seq)
        {
            Sample s;
            if constexpr (std::is_same<Sample, KeyedSample>::value)
            {
                s.id(id);
            }
            s.seq((id - 1) * 2 + seq);
            s.text("fast-" + std::to_string(id) + "-" + std::to_string(seq));
            written += w->write_w_timestamp(&s, HANDLE_NIL, stamp((id - 1) * 2 + seq)) == ReturnCode_t::RETCODE_OK ? 1 : 0;
        }
    }
    if constexpr (std::is_same<Sample, KeyedSample>::value)
    {
        KeyedSample k;
        k.id(a.dispose);
        w->dispose_w_timestamp(&k, HANDLE_NIL, stamp(7));
        k.id(a.unregister);
        w->unregister_instance_w_timestamp(&k, HANDLE_NIL, stamp(8));
    }
    std::printf("{\"event\":\"written\",\"samples\":%d}\n", written);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(a.linger));
    dp->delete_contained_entities();
    return written == 6 ? 0 : 1;
}

template<typename Type, typename Sample>
int subscribe(DomainParticipant* dp, const Args& a)
{
    TypeSupport type(new Type());
    type.register_type(dp);
    Topic* topic = dp->create_topic(a.topic, type.get_type_name(), TOPIC_QOS_DEFAULT);
    Subscriber* sub = dp->create_subscriber(SUBSCRIBER_QOS_DEFAULT);
    DataReaderQos q = DATAREADER_QOS_DEFAULT;
    q.reliability().kind = RELIABLE_RELIABILITY_QOS;
    q.durability().kind = TRANSIENT_LOCAL_DURABILITY_QOS;
    q.history().kind = KEEP_ALL_HISTORY_QOS;
    DataReader* r = sub->create_datareader(topic, q);
    if (r == nullptr)
    {
        std::fprintf(stderr, "partita-fastdds-probe: no reader\n");
        return 1;
    }
    int valid = 0;
    std::map<InstanceHandle_t, int> ids;
    std::map<int, InstanceStateKind> states;
    auto done = [&]() {
        return valid >= 6 && (a.keyless || (states[a.dispose] == NOT_ALIVE_DISPOSED_INSTANCE_STATE &&
               states[a.unregister] == NOT_ALIVE_NO_WRITERS_INSTANCE_STATE));
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.seconds);
    while (!done() && std::chrono::steady_clock::now() < deadline)
    {
        Sample s;
        SampleInfo info;
        if (r->take_next_sample(&s, &info) != ReturnCode_t::RETCODE_OK)
        {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;
        }
        std::string id;
        if constexpr (std::is_same<Sample, KeyedSample>::value)
        {
            if (info.valid_data)
            {
                ids[info.instance_handle] = s.id();
            }
            auto it = ids.find(info.instance_handle);
            id = "\"id\":" + (it == ids.end() ? std::string("null") : std::to_string(it->second)) + ",\"handle\":\"" +
                    hex(info.instance_handle) + "\",";
            if (it != ids.end())
            {
                states[it->second] = info.instance_state;
            }
        }
        valid += info.valid_data ? 1 : 0;
        if (info.valid_data)
        {
            std::printf("{%s\"seq\":%d,\"text\":%s,\"valid\":true,\"state\":\"%s\",\"ts\":%lld}\n", id.c_str(), s.seq(),
                    json_string(s.text()).c_str(), state_name(info.instance_state), ns_of(info.source_timestamp));
        }
        else
        {
            std::printf("{%s\"valid\":false,\"state\":\"%s\",\"ts\":%lld}\n", id.c_str(), state_name(info.instance_state),
                    ns_of(info.source_timestamp));
        }
        std::fflush(stdout);
    }
    dp->delete_contained_entities();
    return done() ? 0 : 1;
}

} // namespace

int main(int argc, char** argv)
{
    Args a;
    if (!parse(argc, argv, a))
    {
        return usage("bad arguments");
    }
    if (std::getenv("FASTRTPS_DEFAULT_PROFILES_FILE") == nullptr)
    {
        return usage("FASTRTPS_DEFAULT_PROFILES_FILE is not set: give it an explicit network configuration");
    }
    DomainParticipant* dp = DomainParticipantFactory::get_instance()->create_participant(a.domain, PARTICIPANT_QOS_DEFAULT);
    if (dp == nullptr)
    {
        std::fprintf(stderr, "partita-fastdds-probe: no participant (is the profile valid?)\n");
        return 1;
    }
    int rc;
    if (a.role == "pub")
    {
        rc = a.keyless ? publish<PlainSamplePubSubType, PlainSample>(dp, a) : publish<KeyedSamplePubSubType, KeyedSample>(dp, a);
    }
    else
    {
        rc = a.keyless ? subscribe<PlainSamplePubSubType, PlainSample>(dp, a) : subscribe<KeyedSamplePubSubType, KeyedSample>(dp, a);
    }
    DomainParticipantFactory::get_instance()->delete_participant(dp);
    return rc;
}
