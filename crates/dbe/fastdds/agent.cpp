// partita-dbe-fastdds-agent: the Fast DDS agent of paper 002's DDS Benchmark Environment, a Fast DDS 2.9 program
// with fastddsgen's type support of idl/dbe.idl (`PubMessage`, `AckMessage`, XCDR1). It follows the agent protocol
// of src/agent/PROTOCOL.md exactly as the Rust agents do: the same arguments, roles (ping, pong, pub, sub, and
// `server`, Fast DDS's discovery server) and `DBE {json}` lines on stdout; logs go to stderr.
//
// Its network is the XML profile FASTRTPS_DEFAULT_PROFILES_FILE names (partita writes it: explicit interfaces and
// unicast peers, no multicast, no built-in transports, no data sharing); without that variable it uses UDPv4 on
// 127.0.0.1 only. `--transport shm` adds Fast DDS's shared-memory transport for the data beside the profile's UDP;
// `--discovery-server IP:PORT` makes the participant a client of the discovery server `--role server --listen
// IP:PORT` runs.
//
// The readers take their samples in their listeners (so a keep-last history never overwrites a sample that was not
// taken yet); the main thread sleeps on a condition variable the listeners signal, never polls.
#include "dbe.h"
#include "dbePubSubTypes.h"

#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/domain/qos/DomainParticipantQos.hpp>
#include <fastdds/dds/log/Log.hpp>
#include <fastdds/dds/log/StdoutErrConsumer.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/DataWriterListener.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/DataReaderListener.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/Topic.hpp>
#include <fastdds/rtps/attributes/ServerAttributes.h>
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.h>
#include <fastdds/rtps/transport/shared_mem/SharedMemTransportDescriptor.h>
#include <fastrtps/utils/IPFinder.h>
#include <fastrtps/utils/IPLocator.h>
#include <fastrtps/utils/md5.h>

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace eprosima::fastdds::dds;
using eprosima::fastdds::rtps::SharedMemTransportDescriptor;
using eprosima::fastdds::rtps::UDPv4TransportDescriptor;
using eprosima::fastrtps::rtps::IPFinder;
using eprosima::fastrtps::rtps::IPLocator;
using eprosima::fastrtps::rtps::Locator_t;

namespace {

const char* const PROGRAM = "partita-dbe-fastdds-agent";
const char* const IMPL = "fastdds";
const int32_t END_SEQ = -1;
const uint32_t MAX_DATA = 16384;
const int END_MARKERS = 5;
const auto END_MARKER_GAP = std::chrono::milliseconds(20);
const double SUB_IDLE_S = 10.0;
// The discovery server's GUID prefix (Fast DDS's default for server 0); every client names the same.
const char* const SERVER_PREFIX = "44.53.00.5f.45.50.52.4f.53.49.4d.41";

int64_t mono_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int64_t g_start_ns = 0;

// ---------------------------------------------------------------------------------------------------------------
// Output

std::mutex g_out_mu;

void dbe_line(const std::string& json)
{
    std::lock_guard<std::mutex> lk(g_out_mu);
    std::string line = "DBE " + json + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
}

void log(const std::string& msg)
{
    std::fprintf(stderr, "%s: %s\n", PROGRAM, msg.c_str());
    std::fflush(stderr);
}

std::string json_string(const std::string& s)
{
    std::string out = "\"";
    for (unsigned char c : s)
    {
        switch (c)
        {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20)
                {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                }
                else
                {
                    out += static_cast<char>(c);
                }
        }
    }
    return out + "\"";
}

// ---------------------------------------------------------------------------------------------------------------
// Arguments

struct Args
{
    std::string role;
    int domain = 0;
    std::string topic = "dbe";
    std::vector<uint32_t> sizes{4};
    long count = 10000;
    long warmup = 1000;
    int subscribers = 1;
    bool reliable = true;
    bool keep_all = false;
    int depth = 1;
    bool transient_local = false;
    double seconds = 2.0;
    long timeout_ms = 1000;
    double match_timeout_s = 30.0;
    double idle_s = SUB_IDLE_S;
    bool shm = false;
    std::string discovery_server;  // IP:PORT or empty
    std::string listen;            // IP:PORT or empty
    std::string peer;              // accepted for the UDP agent's sake, unused
    int cpu = -1;
};

struct ArgError
{
    std::string flag;
    std::string message;
};

[[noreturn]] void bad(const std::string& flag, const std::string& message)
{
    throw ArgError{flag, message};
}

long parse_long(const std::string& flag, const std::string& v, long lo, long hi)
{
    errno = 0;
    char* end = nullptr;
    long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
    {
        bad(flag, "'" + v + "' is not an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return x;
}

double parse_seconds(const std::string& flag, const std::string& v)
{
    errno = 0;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || errno != 0 || !(x > 0.0) || x > 1e6)
    {
        bad(flag, "'" + v + "' is not a positive number of seconds");
    }
    return x;
}

// IP:PORT with an IPv4 address.
Locator_t parse_locator(const std::string& flag, const std::string& v)
{
    auto colon = v.rfind(':');
    if (colon == std::string::npos)
    {
        bad(flag, "'" + v + "' is not IP:PORT");
    }
    std::string ip = v.substr(0, colon);
    long port = parse_long(flag, v.substr(colon + 1), 1, 65535);
    if (!IPLocator::isIPv4(ip))
    {
        bad(flag, "'" + ip + "' is not an IPv4 address");
    }
    Locator_t loc;
    loc.kind = LOCATOR_KIND_UDPv4;
    IPLocator::setIPv4(loc, ip);
    loc.port = static_cast<uint32_t>(port);
    return loc;
}

Args parse(int argc, char** argv)
{
    Args a;
    if (const char* d = std::getenv("PARTITA_DOMAIN"))
    {
        a.domain = static_cast<int>(parse_long("PARTITA_DOMAIN", d, 0, 232));
    }
    for (int i = 1; i < argc; ++i)
    {
        std::string flag = argv[i];
        std::string value;
        auto eq = flag.find('=');
        if (flag.rfind("--", 0) == 0 && eq != std::string::npos)
        {
            value = flag.substr(eq + 1);
            flag = flag.substr(0, eq);
        }
        else
        {
            if (flag.rfind("--", 0) != 0)
            {
                bad(flag, "unexpected argument (every argument is --flag VALUE)");
            }
            if (i + 1 >= argc)
            {
                bad(flag, "needs a value");
            }
            value = argv[++i];
        }
        if (flag == "--impl")
        {
            // The runner passes every agent the same words, `--impl fastdds` included.
            if (value != IMPL)
            {
                bad(flag, "'" + value + "': this is the Fast DDS agent (--impl fastdds)");
            }
        }
        else if (flag == "--role")
        {
            if (value != "ping" && value != "pong" && value != "pub" && value != "sub" && value != "server")
            {
                bad(flag, "'" + value + "' is not one of ping, pong, pub, sub, server");
            }
            a.role = value;
        }
        else if (flag == "--domain")
        {
            a.domain = static_cast<int>(parse_long(flag, value, 0, 232));
        }
        else if (flag == "--topic")
        {
            if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                }))
            {
                bad(flag, "'" + value + "': letters, digits and _ only");
            }
            a.topic = value;
        }
        else if (flag == "--sizes")
        {
            a.sizes.clear();
            std::stringstream ss(value);
            std::string item;
            while (std::getline(ss, item, ','))
            {
                a.sizes.push_back(static_cast<uint32_t>(parse_long(flag, item, 1, MAX_DATA)));
            }
            if (a.sizes.empty())
            {
                bad(flag, "no size given");
            }
        }
        else if (flag == "--count")
        {
            a.count = parse_long(flag, value, 0, 1000000000L);
        }
        else if (flag == "--warmup")
        {
            a.warmup = parse_long(flag, value, 0, 1000000000L);
        }
        else if (flag == "--subscribers")
        {
            a.subscribers = static_cast<int>(parse_long(flag, value, 1, 1000));
        }
        else if (flag == "--reliability")
        {
            if (value == "reliable")
            {
                a.reliable = true;
            }
            else if (value == "best-effort")
            {
                a.reliable = false;
            }
            else
            {
                bad(flag, "'" + value + "' is not reliable or best-effort");
            }
        }
        else if (flag == "--history")
        {
            if (value == "keep-all")
            {
                a.keep_all = true;
            }
            else if (value.rfind("keep-last:", 0) == 0)
            {
                a.keep_all = false;
                a.depth = static_cast<int>(parse_long(flag, value.substr(10), 1, 1000000));
            }
            else
            {
                bad(flag, "'" + value + "' is not keep-last:N or keep-all");
            }
        }
        else if (flag == "--durability")
        {
            if (value == "volatile")
            {
                a.transient_local = false;
            }
            else if (value == "transient-local")
            {
                a.transient_local = true;
            }
            else
            {
                bad(flag, "'" + value + "' is not volatile or transient-local");
            }
        }
        else if (flag == "--seconds")
        {
            a.seconds = parse_seconds(flag, value);
            if (a.seconds > 3600.0)
            {
                bad(flag, "more than 0 and at most 3600");
            }
        }
        else if (flag == "--timeout-ms")
        {
            a.timeout_ms = parse_long(flag, value, 1, 3600L * 1000L);
        }
        else if (flag == "--match-timeout-s")
        {
            a.match_timeout_s = parse_seconds(flag, value);
        }
        else if (flag == "--idle-s")
        {
            a.idle_s = parse_seconds(flag, value);
        }
        else if (flag == "--transport")
        {
            if (value == "udp")
            {
                a.shm = false;
            }
            else if (value == "shm")
            {
                a.shm = true;
            }
            else
            {
                bad(flag, "'" + value + "' is not udp or shm");
            }
        }
        else if (flag == "--discovery-server")
        {
            parse_locator(flag, value);
            a.discovery_server = value;
        }
        else if (flag == "--listen")
        {
            parse_locator(flag, value);
            a.listen = value;
        }
        else if (flag == "--peer")
        {
            parse_locator(flag, value);
            a.peer = value;
        }
        else if (flag == "--cpu")
        {
            a.cpu = static_cast<int>(parse_long(flag, value, 0, CPU_SETSIZE - 1));
        }
        else
        {
            bad(flag, "unknown flag");
        }
    }
    if (a.role.empty())
    {
        bad("--role", "required (ping, pong, pub, sub or server)");
    }
    if (a.role == "ping" && a.count < 1)
    {
        bad("--count", "at least 1");
    }
    if (a.role == "server")
    {
        if (a.listen.empty())
        {
            bad("--listen", "the discovery server needs --listen IP:PORT");
        }
        if (!a.discovery_server.empty())
        {
            bad("--discovery-server", "a discovery server is not a client of another one here");
        }
    }
    return a;
}

// ---------------------------------------------------------------------------------------------------------------
// State the listeners share with the main thread

struct Stats
{
    uint64_t received = 0;
    uint64_t bytes = 0;
    int64_t first_ns = 0;
    int64_t last_ns = 0;
};

struct Shared
{
    std::mutex mu;
    std::condition_variable cv;
    // Matched remote endpoints (PROTOCOL's `Matched`).
    int pub_readers = 0;
    int pub_writers = 0;
    int ack_readers = 0;
    int ack_writers = 0;
    // ping: the seqnums of the acks taken; pong: of the requests taken.
    std::deque<int32_t> acks;
    std::deque<int32_t> requests;
    // pong, sub: the end marker arrived.
    bool end = false;
    // sub: per data length; the time of the last sample (ns since start, 0 = none yet).
    std::map<uint32_t, Stats> stats;
    int64_t last_sample_ns = 0;
    // The signal that asks the agent to stop (0 = none); set with mu held, read anywhere.
    std::atomic<int> signal{0};
};

Shared g;

enum class Mode
{
    Pong,
    Sub
};

class WriterListener : public DataWriterListener
{
public:
    explicit WriterListener(int Shared::* counter)
        : counter_(counter)
    {
    }

    void on_publication_matched(DataWriter*, const PublicationMatchedStatus& info) override
    {
        std::lock_guard<std::mutex> lk(g.mu);
        g.*counter_ = info.current_count;
        g.cv.notify_all();
    }

private:
    int Shared::* counter_;
};

class PubReaderListener : public DataReaderListener
{
public:
    explicit PubReaderListener(Mode mode)
        : mode_(mode)
    {
    }

    void on_subscription_matched(DataReader*, const SubscriptionMatchedStatus& info) override
    {
        std::lock_guard<std::mutex> lk(g.mu);
        g.pub_writers = info.current_count;
        g.cv.notify_all();
    }

    void on_data_available(DataReader* reader) override
    {
        // One message buffer, reused; the listener may be called from several receive threads (UDP, SHM).
        std::lock_guard<std::mutex> take_lk(take_mu_);
        SampleInfo info;
        while (reader->take_next_sample(&msg_, &info) == ReturnCode_t::RETCODE_OK)
        {
            if (!info.valid_data)
            {
                continue;
            }
            int32_t seq = msg_.seqnum();
            if (mode_ == Mode::Pong)
            {
                std::lock_guard<std::mutex> lk(g.mu);
                if (seq == END_SEQ)
                {
                    g.end = true;
                }
                else
                {
                    g.requests.push_back(seq);
                }
                g.cv.notify_all();
            }
            else
            {
                int64_t t = mono_ns() - g_start_ns;
                std::lock_guard<std::mutex> lk(g.mu);
                if (seq == END_SEQ)
                {
                    g.end = true;
                    g.cv.notify_all();
                    continue;
                }
                bool first = g.last_sample_ns == 0;
                uint32_t len = static_cast<uint32_t>(msg_.data().size());
                Stats& s = g.stats[len];
                if (s.received == 0)
                {
                    s.first_ns = t;
                }
                s.received += 1;
                s.bytes += len;
                s.last_ns = t;
                g.last_sample_ns = t;
                if (first)
                {
                    g.cv.notify_all();  // run_sub now waits with the 10 s idle deadline
                }
            }
        }
    }

private:
    Mode mode_;
    std::mutex take_mu_;
    PubMessage msg_;
};

class AckReaderListener : public DataReaderListener
{
public:
    void on_subscription_matched(DataReader*, const SubscriptionMatchedStatus& info) override
    {
        std::lock_guard<std::mutex> lk(g.mu);
        g.ack_writers = info.current_count;
        g.cv.notify_all();
    }

    void on_data_available(DataReader* reader) override
    {
        std::lock_guard<std::mutex> take_lk(take_mu_);
        SampleInfo info;
        while (reader->take_next_sample(&msg_, &info) == ReturnCode_t::RETCODE_OK)
        {
            if (!info.valid_data)
            {
                continue;
            }
            std::lock_guard<std::mutex> lk(g.mu);
            g.acks.push_back(msg_.seqnum());
            g.cv.notify_all();
        }
    }

private:
    std::mutex take_mu_;
    AckMessage msg_;
};

// ---------------------------------------------------------------------------------------------------------------
// Process-wide resources, cleaned up on every exit

DomainParticipant* g_participant = nullptr;

void cleanup()
{
    if (g_participant != nullptr)
    {
        g_participant->delete_contained_entities();
        DomainParticipantFactory::get_instance()->delete_participant(g_participant);
        g_participant = nullptr;
    }
}

[[noreturn]] void fail(const std::string& message)
{
    dbe_line("{\"kind\":\"error\",\"message\":" + json_string(std::string(IMPL) + ": " + message) + "}");
    cleanup();
    std::exit(1);
}

void print_process(const Args& a, int64_t discovery_ns)
{
    struct rusage ru;
    std::memset(&ru, 0, sizeof ru);
    getrusage(RUSAGE_SELF, &ru);
    auto ns = [](const struct timeval& tv) {
        return static_cast<int64_t>(tv.tv_sec) * 1000000000LL + static_cast<int64_t>(tv.tv_usec) * 1000LL;
    };
    long hwm = -1;
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
    {
        if (line.rfind("VmHWM:", 0) == 0)
        {
            hwm = std::strtol(line.c_str() + 6, nullptr, 10);
            break;
        }
    }
    if (hwm < 0)
    {
        hwm = ru.ru_maxrss;  // KiB on Linux as well
    }
    std::string d = discovery_ns < 0 ? std::string("null") : std::to_string(discovery_ns);
    dbe_line(std::string("{\"kind\":\"process\",\"impl\":\"") + IMPL + "\",\"role\":\"" + a.role +
            "\",\"discovery_ns\":" + d + ",\"cpu_user_ns\":" + std::to_string(ns(ru.ru_utime)) +
            ",\"cpu_system_ns\":" + std::to_string(ns(ru.ru_stime)) +
            ",\"max_rss_kib\":" + std::to_string(hwm) + "}");
}

// Blocks SIGTERM and SIGINT in this thread (and so in every thread created later) and takes them in a thread of
// their own, which tells the main thread through `g`.
void handle_signals()
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([set]() {
        int sig = 0;
        while (sigwait(&set, &sig) != 0)
        {
        }
        std::lock_guard<std::mutex> lk(g.mu);
        g.signal = sig;
        g.cv.notify_all();
    }).detach();
}

// ---------------------------------------------------------------------------------------------------------------
// The participant

std::string locator_text(const Locator_t& l)
{
    std::ostringstream s;
    s << l;
    return s.str();
}

std::string locators_text(const eprosima::fastdds::rtps::LocatorList& list, const char* if_empty)
{
    std::string out;
    for (const auto& l : list)
    {
        out += (out.empty() ? "" : ", ") + locator_text(l);
    }
    return out.empty() ? if_empty : out;
}

// The shared-memory locator Fast DDS would make for this host: 'U', then the 16-bit host id Fast DDS derives from
// the host's IPv4 addresses (utils/Host.hpp, not installed), which it also puts in bytes 2 and 3 of every GUID
// prefix. Port 0: Fast DDS gives it the participant's port.
Locator_t shm_locator(uint16_t& host_id)
{
    eprosima::fastdds::rtps::LocatorList ips;
    IPFinder::getIP4Address(&ips);
    host_id = 0;
    if (ips.size() > 0)
    {
        MD5 md5;
        for (const auto& l : ips)
        {
            md5.update(l.address, sizeof(l.address));
        }
        md5.finalize();
        for (size_t i = 0; i < sizeof(md5.digest); i += 2)
        {
            uint16_t tmp = static_cast<uint16_t>((static_cast<uint16_t>(md5.digest[i]) << 8) | md5.digest[i + 1]);
            host_id ^= tmp;
        }
    }
    else
    {
        reinterpret_cast<uint8_t*>(&host_id)[0] = 127;
        reinterpret_cast<uint8_t*>(&host_id)[1] = 1;
    }
    Locator_t loc;
    loc.kind = LOCATOR_KIND_SHM;
    loc.port = 0;
    std::memset(loc.address, 0, sizeof loc.address);
    loc.address[0] = 'U';
    loc.address[1] = static_cast<eprosima::fastrtps::rtps::octet>(host_id & 0xff);
    loc.address[2] = static_cast<eprosima::fastrtps::rtps::octet>(host_id >> 8);
    return loc;
}

DomainParticipant* make_participant(const Args& a)
{
    auto* factory = DomainParticipantFactory::get_instance();
    DomainParticipantQos pq;
    std::string what;
    const char* profile = std::getenv("FASTRTPS_DEFAULT_PROFILES_FILE");
    if (profile != nullptr && *profile != '\0')
    {
        std::ifstream probe(profile);
        if (!probe.good())
        {
            fail(std::string("cannot read FASTRTPS_DEFAULT_PROFILES_FILE=") + profile);
        }
        factory->load_profiles();
        pq = factory->get_default_participant_qos();
        // Fast DDS ignores a profile it cannot parse and falls back to its defaults (every interface, multicast,
        // shared memory): never run on those when a profile was asked for.
        if (pq == PARTICIPANT_QOS_DEFAULT)
        {
            fail(std::string("FASTRTPS_DEFAULT_PROFILES_FILE=") + profile +
                    " gave no default participant profile (is_default_profile=\"true\"): refusing Fast DDS's defaults");
        }
        what = std::string("profile ") + profile;
    }
    else
    {
        // Loopback only: one UDPv4 transport on 127.0.0.1, no built-in transports (no shared memory, no multicast).
        pq = PARTICIPANT_QOS_DEFAULT;
        auto udp = std::make_shared<UDPv4TransportDescriptor>();
        udp->interfaceWhiteList.push_back("127.0.0.1");
        udp->maxInitialPeersRange = 21;
        pq.transport().use_builtin_transports = false;
        pq.transport().user_transports.clear();
        pq.transport().user_transports.push_back(udp);
        Locator_t lo;
        lo.kind = LOCATOR_KIND_UDPv4;
        IPLocator::setIPv4(lo, 127, 0, 0, 1);
        lo.port = 0;
        pq.wire_protocol().builtin.metatrafficUnicastLocatorList.clear();
        pq.wire_protocol().builtin.metatrafficUnicastLocatorList.push_back(lo);
        pq.wire_protocol().builtin.metatrafficMulticastLocatorList.clear();
        pq.wire_protocol().default_unicast_locator_list.clear();
        pq.wire_protocol().default_unicast_locator_list.push_back(lo);
        pq.wire_protocol().default_multicast_locator_list.clear();
        pq.wire_protocol().builtin.initialPeersList.clear();
        pq.wire_protocol().builtin.initialPeersList.push_back(lo);
        what = "no FASTRTPS_DEFAULT_PROFILES_FILE: UDPv4 on 127.0.0.1 only";
    }
    pq.name("partita-dbe-" + a.role);

    uint16_t host_id = 0;
    bool shm_added = false;
    if (a.shm)
    {
        bool has_shm = false;
        for (const auto& t : pq.transport().user_transports)
        {
            has_shm |= dynamic_cast<SharedMemTransportDescriptor*>(t.get()) != nullptr;
        }
        if (!has_shm)
        {
            auto shm = std::make_shared<SharedMemTransportDescriptor>();
            // Room for a burst of 16 KiB samples (Fast DDS's default segment is 512 KiB).
            shm->segment_size(4 * 1024 * 1024);
            pq.transport().user_transports.push_back(shm);
            shm_added = true;
        }
        // The data (user traffic) goes over SHM only: its one data locator is this host's SHM locator. Discovery
        // (metatraffic) stays on the profile's UDP. Beside UDP data locators Fast DDS 2.9 would send reliable data
        // over SHM but best-effort data over UDP (it does so with its built-in transports too), so the data
        // locators are SHM alone; a peer without SHM (an agent with --transport udp, or on another host) then
        // matches but gets no data: every agent of a test uses the same --transport.
        Locator_t shm_loc = shm_locator(host_id);
        auto& data = pq.wire_protocol().default_unicast_locator_list;
        data.clear();
        data.push_back(shm_loc);
    }

    bool server = a.role == "server";
    if (server)
    {
        Locator_t listen = parse_locator("--listen", a.listen);
        auto& b = pq.wire_protocol().builtin;
        b.discovery_config.discoveryProtocol = eprosima::fastrtps::rtps::DiscoveryProtocol_t::SERVER;
        std::istringstream(SERVER_PREFIX) >> pq.wire_protocol().prefix;
        b.metatrafficUnicastLocatorList.clear();
        b.metatrafficUnicastLocatorList.push_back(listen);
        b.metatrafficMulticastLocatorList.clear();
        b.initialPeersList.clear();
    }
    else if (!a.discovery_server.empty())
    {
        Locator_t at = parse_locator("--discovery-server", a.discovery_server);
        auto& b = pq.wire_protocol().builtin;
        b.discovery_config.discoveryProtocol = eprosima::fastrtps::rtps::DiscoveryProtocol_t::CLIENT;
        eprosima::fastdds::rtps::RemoteServerAttributes rs;
        rs.ReadguidPrefix(SERVER_PREFIX);
        rs.metatrafficUnicastLocatorList.push_back(at);
        b.discovery_config.m_DiscoveryServers.clear();
        b.discovery_config.m_DiscoveryServers.push_back(rs);
    }

    // Report what the participant will use.
    std::string transports;
    for (const auto& t : pq.transport().user_transports)
    {
        std::string name = "other";
        if (auto* u = dynamic_cast<UDPv4TransportDescriptor*>(t.get()))
        {
            name = "UDPv4";
            if (!u->interfaceWhiteList.empty())
            {
                name += " (interfaces";
                for (const auto& i : u->interfaceWhiteList)
                {
                    name += " " + i;
                }
                name += ")";
            }
        }
        else if (dynamic_cast<SharedMemTransportDescriptor*>(t.get()) != nullptr)
        {
            name = shm_added ? "SHM (--transport shm)" : "SHM (from the profile)";
        }
        transports += (transports.empty() ? "" : " + ") + name;
    }
    if (pq.transport().use_builtin_transports)
    {
        transports += (transports.empty() ? "" : " + ") + std::string("Fast DDS's built-in UDPv4 and SHM");
    }
    std::string discovery = server ? "discovery SERVER on " + a.listen :
            !a.discovery_server.empty() ? "discovery CLIENT of " + a.discovery_server : "simple discovery";
    log(what + "; transports: " + transports + "; " + discovery + "; metatraffic: " +
            locators_text(pq.wire_protocol().builtin.metatrafficUnicastLocatorList, "(Fast DDS's defaults)") +
            "; data: " + locators_text(pq.wire_protocol().default_unicast_locator_list, "(Fast DDS's defaults)") +
            "; initial peers: " + locators_text(pq.wire_protocol().builtin.initialPeersList, "(none)"));

    DomainParticipant* dp = factory->create_participant(a.domain, pq);
    if (dp == nullptr)
    {
        fail("cannot create the participant on domain " + std::to_string(a.domain) +
                " (Fast DDS logs why on stderr; is the profile valid, is --listen's address one of its interfaces?)");
    }
    g_participant = dp;
    std::ostringstream guid;
    guid << dp->guid();
    log("participant " + guid.str() + " on domain " + std::to_string(a.domain));
    if (a.shm && !server)
    {
        // The SHM locator must carry the host id Fast DDS computed, else peers ignore it (and so the data). (A
        // server's GUID prefix is the fixed one above, without the host id; it has no data to carry anyway.)
        const auto& p = dp->guid().guidPrefix.value;
        uint16_t actual = static_cast<uint16_t>(p[2] | (p[3] << 8));
        if (actual != host_id)
        {
            fail("the shared-memory locator's host id " + std::to_string(host_id) + " is not Fast DDS's " +
                    std::to_string(actual));
        }
    }
    return dp;
}

// ---------------------------------------------------------------------------------------------------------------
// Endpoints

struct Endpoints
{
    DataWriter* pub_writer = nullptr;
    DataReader* pub_reader = nullptr;
    DataWriter* ack_writer = nullptr;
    DataReader* ack_reader = nullptr;
};

template<typename Qos>
void apply_qos(Qos& q, const Args& a)
{
    q.reliability().kind = a.reliable ? RELIABLE_RELIABILITY_QOS : BEST_EFFORT_RELIABILITY_QOS;
    q.durability().kind = a.transient_local ? TRANSIENT_LOCAL_DURABILITY_QOS : VOLATILE_DURABILITY_QOS;
    if (a.keep_all)
    {
        q.history().kind = KEEP_ALL_HISTORY_QOS;
    }
    else
    {
        q.history().kind = KEEP_LAST_HISTORY_QOS;
        q.history().depth = a.depth;
        if (q.resource_limits().max_samples_per_instance > 0 && q.resource_limits().max_samples_per_instance < a.depth)
        {
            q.resource_limits().max_samples_per_instance = a.depth;
        }
        if (q.resource_limits().max_samples > 0 && q.resource_limits().max_samples < a.depth)
        {
            q.resource_limits().max_samples = a.depth;
        }
    }
    // Partitions never share memory: no data sharing (the profile says so too; without one, say it here).
    q.data_sharing().off();
}

Endpoints make_endpoints(DomainParticipant* dp, const Args& a)
{
    Endpoints e;
    bool ping = a.role == "ping", pong = a.role == "pong", pub = a.role == "pub", sub = a.role == "sub";
    TypeSupport pub_type(new PubMessagePubSubType());
    TypeSupport ack_type(new AckMessagePubSubType());
    if (pub_type.register_type(dp) != ReturnCode_t::RETCODE_OK)
    {
        fail("cannot register the type PubMessage");
    }
    Topic* pub_topic = dp->create_topic(a.topic + "_pub", pub_type.get_type_name(), TOPIC_QOS_DEFAULT);
    if (pub_topic == nullptr)
    {
        fail("cannot create the topic " + a.topic + "_pub");
    }
    Topic* ack_topic = nullptr;
    if (ping || pong)
    {
        if (ack_type.register_type(dp) != ReturnCode_t::RETCODE_OK)
        {
            fail("cannot register the type AckMessage");
        }
        ack_topic = dp->create_topic(a.topic + "_ack", ack_type.get_type_name(), TOPIC_QOS_DEFAULT);
        if (ack_topic == nullptr)
        {
            fail("cannot create the topic " + a.topic + "_ack");
        }
    }
    Publisher* publisher = dp->create_publisher(PUBLISHER_QOS_DEFAULT);
    Subscriber* subscriber = dp->create_subscriber(SUBSCRIBER_QOS_DEFAULT);
    if (publisher == nullptr || subscriber == nullptr)
    {
        fail("cannot create the publisher or the subscriber");
    }
    DataWriterQos wq = publisher->get_default_datawriter_qos();
    apply_qos(wq, a);
    DataReaderQos rq = subscriber->get_default_datareader_qos();
    apply_qos(rq, a);
    // The listeners live as long as the process.
    if (ping || pub)
    {
        static WriterListener l(&Shared::pub_readers);
        e.pub_writer = publisher->create_datawriter(pub_topic, wq, &l);
        if (e.pub_writer == nullptr)
        {
            fail("cannot create the writer of " + a.topic + "_pub (inconsistent QoS?)");
        }
    }
    if (ping)
    {
        static AckReaderListener l;
        e.ack_reader = subscriber->create_datareader(ack_topic, rq, &l);
        if (e.ack_reader == nullptr)
        {
            fail("cannot create the reader of " + a.topic + "_ack (inconsistent QoS?)");
        }
    }
    if (pong || sub)
    {
        static PubReaderListener l(pong ? Mode::Pong : Mode::Sub);
        e.pub_reader = subscriber->create_datareader(pub_topic, rq, &l);
        if (e.pub_reader == nullptr)
        {
            fail("cannot create the reader of " + a.topic + "_pub (inconsistent QoS?)");
        }
    }
    if (pong)
    {
        static WriterListener l(&Shared::ack_readers);
        e.ack_writer = publisher->create_datawriter(ack_topic, wq, &l);
        if (e.ack_writer == nullptr)
        {
            fail("cannot create the writer of " + a.topic + "_ack (inconsistent QoS?)");
        }
    }
    return e;
}

// Whether the role's endpoints matched what they need (call with g.mu held).
bool all_matched(const Args& a)
{
    if (a.role == "ping")
    {
        return g.pub_readers >= a.subscribers && g.ack_writers >= a.subscribers;
    }
    if (a.role == "pub")
    {
        return g.pub_readers >= a.subscribers;
    }
    if (a.role == "pong")
    {
        return g.pub_writers >= 1 && g.ack_readers >= 1;
    }
    return g.pub_writers >= 1;  // sub
}

std::string matched_text(const Args& a)
{
    if (a.role == "ping")
    {
        return "pub_readers=" + std::to_string(g.pub_readers) + ", ack_writers=" + std::to_string(g.ack_writers);
    }
    if (a.role == "pub")
    {
        return "pub_readers=" + std::to_string(g.pub_readers);
    }
    if (a.role == "pong")
    {
        return "pub_writers=" + std::to_string(g.pub_writers) + ", ack_readers=" + std::to_string(g.ack_readers);
    }
    return "pub_writers=" + std::to_string(g.pub_writers);
}

std::string needed_text(const Args& a)
{
    if (a.role == "ping")
    {
        return std::to_string(a.subscribers) + " reader(s) of " + a.topic + "_pub and " + std::to_string(a.subscribers) +
               " writer(s) of " + a.topic + "_ack";
    }
    if (a.role == "pub")
    {
        return std::to_string(a.subscribers) + " reader(s) of " + a.topic + "_pub";
    }
    if (a.role == "pong")
    {
        return "a writer of " + a.topic + "_pub and a reader of " + a.topic + "_ack";
    }
    return "a writer of " + a.topic + "_pub";
}

std::chrono::steady_clock::time_point match_deadline(const Args& a)
{
    // From the agent's start, as the discovery time.
    auto start = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(g_start_ns));
    return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(a.match_timeout_s));
}

[[noreturn]] void fail_not_matched(const Args& a, const std::string& matched)
{
    std::ostringstream s;
    s << needed_text(a) << " not matched within " << a.match_timeout_s << " s (matched so far: " << matched << ")";
    fail(s.str());
}

[[noreturn]] void fail_signal(int sig)
{
    fail(std::string("stopped by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + " before the end");
}

// ping and pub: waits until all matched; returns the discovery time.
int64_t wait_matched(const Args& a)
{
    std::unique_lock<std::mutex> lk(g.mu);
    auto deadline = match_deadline(a);
    while (!all_matched(a) && g.signal == 0)
    {
        if (g.cv.wait_until(lk, deadline) == std::cv_status::timeout && !all_matched(a))
        {
            std::string m = matched_text(a);
            lk.unlock();
            fail_not_matched(a, m);
        }
    }
    if (g.signal != 0)
    {
        int sig = g.signal;
        lk.unlock();
        fail_signal(sig);
    }
    return mono_ns() - g_start_ns;
}

void write_end_markers(DataWriter* w, const Args& a)
{
    PubMessage end;
    end.seqnum(END_SEQ);
    for (int i = 0; i < END_MARKERS; ++i)
    {
        if (i > 0)
        {
            std::this_thread::sleep_for(END_MARKER_GAP);
        }
        w->write(&end);
    }
    if (a.reliable)
    {
        // Let the reliable protocol deliver the markers (behind whatever is still queued: a keep-all pub may have
        // thousands of samples in flight) before the writer goes; a sub gives up --idle-s after its last sample.
        if (w->wait_for_acknowledgments(eprosima::fastrtps::Duration_t(a.idle_s)) != ReturnCode_t::RETCODE_OK)
        {
            log("the readers did not acknowledge everything (end markers included) within " + std::to_string(a.idle_s) + " s");
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Roles

int64_t run_ping(const Args& a, const Endpoints& e)
{
    int64_t discovery = wait_matched(a);
    log("matched " + needed_text(a) + " after " + std::to_string(discovery / 1000000) + " ms");
    PubMessage msg;
    int32_t seq = 0;
    const auto timeout = std::chrono::milliseconds(a.timeout_ms);
    for (uint32_t size : a.sizes)
    {
        std::vector<uint8_t> data(size);
        for (uint32_t i = 0; i < size; ++i)
        {
            data[i] = static_cast<uint8_t>(i % 251);
        }
        msg.data(std::move(data));
        std::vector<int64_t> rtts;
        rtts.reserve(static_cast<size_t>(a.count));
        long lost = 0;
        for (long n = 0; n < a.warmup + a.count; ++n, ++seq)
        {
            msg.seqnum(seq);
            auto deadline = std::chrono::steady_clock::now() + timeout;
            int64_t t0 = mono_ns();
            ReturnCode_t rc = e.pub_writer->write(&msg, HANDLE_NIL);
            if (rc != ReturnCode_t::RETCODE_OK && rc != ReturnCode_t::RETCODE_TIMEOUT)
            {
                fail("writing PubMessage " + std::to_string(seq) + " failed (return code " + std::to_string(rc()) + ")");
            }
            int got = 0;
            int64_t t1 = 0;
            {
                std::unique_lock<std::mutex> lk(g.mu);
                while (got < a.subscribers && g.signal == 0)
                {
                    while (!g.acks.empty())
                    {
                        int32_t s = g.acks.front();
                        g.acks.pop_front();
                        if (s == seq)
                        {
                            got += 1;
                        }
                    }
                    if (got >= a.subscribers)
                    {
                        t1 = mono_ns();
                        break;
                    }
                    if (g.cv.wait_until(lk, deadline) == std::cv_status::timeout && g.acks.empty())
                    {
                        break;
                    }
                }
                if (g.signal != 0)
                {
                    int sig = g.signal;
                    lk.unlock();
                    fail_signal(sig);
                }
            }
            if (n < a.warmup)
            {
                continue;
            }
            if (got >= a.subscribers)
            {
                rtts.push_back(t1 - t0);
            }
            else
            {
                lost += 1;
            }
        }
        std::string line = "{\"kind\":\"rtt\",\"size\":" + std::to_string(size) + ",\"rtt_ns\":[";
        line.reserve(line.size() + rtts.size() * 9 + 64);
        for (size_t i = 0; i < rtts.size(); ++i)
        {
            if (i > 0)
            {
                line += ',';
            }
            line += std::to_string(rtts[i]);
        }
        line += "],\"lost\":" + std::to_string(lost) + ",\"warmup\":" + std::to_string(a.warmup) + "}";
        dbe_line(line);
    }
    write_end_markers(e.pub_writer, a);
    return discovery;
}

int64_t run_pong(const Args& a, const Endpoints& e)
{
    int64_t discovery = -1;
    auto deadline = match_deadline(a);
    AckMessage ack;
    std::vector<int32_t> todo;
    bool end = false;
    while (!end)
    {
        {
            std::unique_lock<std::mutex> lk(g.mu);
            for (;;)
            {
                if (g.signal != 0)
                {
                    log(std::string("stopping on ") + (g.signal == SIGINT ? "SIGINT" : "SIGTERM"));
                    return discovery;
                }
                if (discovery < 0 && all_matched(a))
                {
                    discovery = mono_ns() - g_start_ns;
                    log("matched " + needed_text(a) + " after " + std::to_string(discovery / 1000000) + " ms");
                }
                // Requests wait until the ack writer matched (an ack written before would reach no one).
                if ((discovery >= 0 && !g.requests.empty()) || g.end)
                {
                    break;
                }
                if (discovery < 0)
                {
                    if (g.cv.wait_until(lk, deadline) == std::cv_status::timeout && !all_matched(a) && !g.end &&
                            g.signal == 0)
                    {
                        std::string m = matched_text(a);
                        lk.unlock();
                        fail_not_matched(a, m);
                    }
                }
                else
                {
                    g.cv.wait(lk);
                }
            }
            todo.assign(g.requests.begin(), g.requests.end());
            g.requests.clear();
            end = g.end;
        }
        for (int32_t seq : todo)
        {
            ack.seqnum(seq);
            ReturnCode_t rc = e.ack_writer->write(&ack, HANDLE_NIL);
            if (rc != ReturnCode_t::RETCODE_OK && rc != ReturnCode_t::RETCODE_TIMEOUT)
            {
                fail("writing AckMessage " + std::to_string(seq) + " failed (return code " + std::to_string(rc()) + ")");
            }
        }
    }
    log("end marker received");
    return discovery;
}

int64_t run_pub(const Args& a, const Endpoints& e)
{
    int64_t discovery = wait_matched(a);
    log("matched " + needed_text(a) + " after " + std::to_string(discovery / 1000000) + " ms");
    PubMessage msg;
    int32_t seq = 0;
    const int64_t span = static_cast<int64_t>(a.seconds * 1e9);
    long timeouts = 0;
    for (uint32_t size : a.sizes)
    {
        std::vector<uint8_t> data(size);
        for (uint32_t i = 0; i < size; ++i)
        {
            data[i] = static_cast<uint8_t>(i % 251);
        }
        msg.data(std::move(data));
        uint64_t sent = 0;
        int64_t t0 = mono_ns();
        int64_t now = t0;
        while (now - t0 < span)
        {
            if (g.signal != 0)
            {
                fail_signal(g.signal);
            }
            msg.seqnum(seq);
            ReturnCode_t rc = e.pub_writer->write(&msg, HANDLE_NIL);
            if (rc == ReturnCode_t::RETCODE_OK)
            {
                sent += 1;
                seq += 1;
            }
            else if (rc == ReturnCode_t::RETCODE_TIMEOUT)
            {
                timeouts += 1;  // a full keep-all history did not drain within max_blocking_time: try again
            }
            else
            {
                fail("writing PubMessage " + std::to_string(seq) + " failed (return code " + std::to_string(rc()) + ")");
            }
            // Under SCHED_FIFO, pinned to one CPU with Fast DDS's own threads (receive, events), a writer that
            // never blocks would keep them off the CPU for the whole test (the Rust agents yield as well).
            sched_yield();
            now = mono_ns();
        }
        dbe_line("{\"kind\":\"sent\",\"size\":" + std::to_string(size) + ",\"sent\":" + std::to_string(sent) +
                ",\"elapsed_ns\":" + std::to_string(now - t0) + "}");
    }
    if (timeouts > 0)
    {
        log(std::to_string(timeouts) + " writes timed out on a full history and were tried again");
    }
    write_end_markers(e.pub_writer, a);
    return discovery;
}

int64_t run_sub(const Args& a)
{
    int64_t discovery = -1;
    auto deadline = match_deadline(a);
    auto at = [](int64_t ns_since_start) {
        return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(g_start_ns + ns_since_start));
    };
    const int64_t idle = static_cast<int64_t>(a.idle_s * 1e9);
    std::map<uint32_t, Stats> stats;
    {
        std::unique_lock<std::mutex> lk(g.mu);
        for (;;)
        {
            if (g.signal != 0)
            {
                log(std::string("stopping on ") + (g.signal == SIGINT ? "SIGINT" : "SIGTERM"));
                break;
            }
            if (g.end)
            {
                log("end marker received");
                break;
            }
            if (discovery < 0 && all_matched(a))
            {
                discovery = mono_ns() - g_start_ns;
                log("matched " + needed_text(a) + " after " + std::to_string(discovery / 1000000) + " ms");
            }
            if (discovery < 0)
            {
                if (g.cv.wait_until(lk, deadline) == std::cv_status::timeout && !all_matched(a) && !g.end &&
                        g.signal == 0)
                {
                    std::string m = matched_text(a);
                    lk.unlock();
                    fail_not_matched(a, m);
                }
            }
            else if (g.last_sample_ns == 0)
            {
                g.cv.wait(lk);  // for the first sample, the end marker or a signal
            }
            else
            {
                // 10 s after the last sample.
                int64_t last = g.last_sample_ns;
                if (mono_ns() - g_start_ns - last >= idle)
                {
                    log("no sample for " + std::to_string(a.idle_s) + " s: ending");
                    break;
                }
                g.cv.wait_until(lk, at(last + idle));
            }
        }
        stats = g.stats;
    }
    for (const auto& kv : stats)
    {
        dbe_line("{\"kind\":\"received\",\"size\":" + std::to_string(kv.first) + ",\"received\":" +
                std::to_string(kv.second.received) + ",\"bytes\":" + std::to_string(kv.second.bytes) + ",\"first_ns\":" +
                std::to_string(kv.second.first_ns) + ",\"last_ns\":" + std::to_string(kv.second.last_ns) + "}");
    }
    return discovery;
}

void run_server(const Args& a)
{
    log("discovery server " + std::string(SERVER_PREFIX) + " listening on " + a.listen + " until SIGTERM or SIGINT");
    std::unique_lock<std::mutex> lk(g.mu);
    g.cv.wait(lk, [] { return g.signal != 0; });
    log(std::string("stopping on ") + (g.signal == SIGINT ? "SIGINT" : "SIGTERM"));
}

const char* const USAGE =
    "usage: partita-dbe-fastdds-agent [--impl fastdds] --role ping|pong|pub|sub|server [--domain N] [--topic BASE]\n"
    "  [--sizes A,B,..] [--count N] [--warmup N] [--subscribers N] [--reliability reliable|best-effort]\n"
    "  [--history keep-last:N|keep-all] [--durability volatile|transient-local] [--seconds S] [--timeout-ms MS]\n"
    "  [--match-timeout-s S] [--idle-s S] [--transport udp|shm] [--discovery-server IP:PORT] [--listen IP:PORT] [--peer IP:PORT]\n"
    "  [--cpu N]   (crates/dbe/src/agent/PROTOCOL.md)\n";

}  // namespace

int main(int argc, char** argv)
{
    g_start_ns = mono_ns();
    Args a;
    try
    {
        a = parse(argc, argv);
    }
    catch (const ArgError& e)
    {
        std::fprintf(stderr, "%s: argument %s: %s\n%s", PROGRAM, e.flag.c_str(), e.message.c_str(), USAGE);
        return 2;
    }
    // Pin first: every thread created from here on (Fast DDS's too) inherits the affinity.
    if (a.cpu >= 0)
    {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(a.cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
        {
            fail("--cpu " + std::to_string(a.cpu) + ": sched_setaffinity: " + std::strerror(errno));
        }
    }
    handle_signals();
    // Fast DDS's own log on stderr only: stdout carries the DBE lines.
    Log::ClearConsumers();
    {
        std::unique_ptr<StdoutErrConsumer> consumer(new StdoutErrConsumer());
        consumer->stderr_threshold(Log::Kind::Info);
        Log::RegisterConsumer(std::move(consumer));
    }
    if (!a.peer.empty())
    {
        log("--peer is the UDP agent's; Fast DDS discovers its peers (ignored)");
    }
    if (!a.listen.empty() && a.role != "server")
    {
        log("--listen is the UDP agent's and the discovery server's; ignored for --role " + a.role);
    }
    DomainParticipant* dp = make_participant(a);
    int64_t discovery = -1;
    if (a.role == "server")
    {
        run_server(a);
    }
    else
    {
        Endpoints e = make_endpoints(dp, a);
        if (a.role == "ping")
        {
            discovery = run_ping(a, e);
        }
        else if (a.role == "pong")
        {
            discovery = run_pong(a, e);
        }
        else if (a.role == "pub")
        {
            discovery = run_pub(a, e);
        }
        else
        {
            discovery = run_sub(a);
        }
    }
    cleanup();
    print_process(a, discovery);
    return 0;
}
