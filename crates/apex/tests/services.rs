//! The APEX services on ports made in this process, both ends of each channel here, through a653rs's binding
//! traits (and its P1 abstraction where it has one). Every test uses channel names of its own: the partition's
//! state is the process's, shared by the tests running in parallel, and stays in COLD_START throughout.
use a653rs::bindings::*;
use a653rs::prelude::{Name, SamplingPortDestination};
use partita_apex::{take_last_error, ApexError, PartitaHypervisor as H};
use partita_ports::{create_status, ChannelMemory, Direction, Fault, PortEntry, PortError, PortKind, Ports, StatusReader};
use std::str::FromStr;
use std::time::{Duration, Instant};

fn name(n: &str) -> ApexName {
    Name::from_str(n).unwrap().into()
}

/// The supervisor's view of both ends' status memory.
struct Seen {
    source: StatusReader,
    destination: StatusReader,
}

/// Makes a channel as the supervisor would and gives both its ends to this process, each end in a `Ports` of
/// its own (as two partitions would have them).
fn channel(port: &str, kind: PortKind, max_message: u32, depth_or_refresh: u64) -> Seen {
    let memory = ChannelMemory::create(port, kind, max_message, if kind == PortKind::Queuing { depth_or_refresh } else { 1 }).unwrap();
    let (source_status, destination_status) = (create_status(port).unwrap(), create_status(port).unwrap());
    let seen = Seen { source: StatusReader::for_supervisor(&source_status).unwrap(), destination: StatusReader::for_supervisor(&destination_status).unwrap() };
    let entry = |direction| PortEntry { name: port.into(), kind, direction, max_message, depth_or_refresh, data_fd: 3, status_fd: 4, ack_fd: (kind == PortKind::Queuing).then_some(5) };
    H::provide_ports(Ports::from_fds(vec![(entry(Direction::Source), memory.source(source_status).unwrap())]));
    H::provide_ports(Ports::from_fds(vec![(entry(Direction::Destination), memory.destination(destination_status).unwrap())]));
    seen
}

fn ms(n: u64) -> ApexSystemTime {
    Duration::from_millis(n).as_nanos() as ApexSystemTime
}

fn read(id: SamplingPortId, buf: &mut [u8]) -> Result<(Validity, MessageSize), ErrorReturnCode> {
    // SAFETY: partita's READ_SAMPLING_MESSAGE writes only within `buf` whatever its length.
    unsafe { <H as ApexSamplingPortP4>::read_sampling_message(id, buf) }
}

fn receive(id: QueuingPortId, timeout: ApexSystemTime, buf: &mut [u8]) -> Result<(MessageSize, QueueOverflow), ErrorReturnCode> {
    // SAFETY: as for `read`: partita's RECEIVE_QUEUING_MESSAGE writes only within `buf`.
    unsafe { <H as ApexQueuingPortP4>::receive_queuing_message(id, timeout, buf) }
}

#[test]
fn a_sampling_message_written_is_read_with_its_validity() {
    let seen = channel("s-valid", PortKind::Sampling, 16, ms(50) as u64);
    // The destination first: GET_SAMPLING_PORT_ID below finds the first port of the name, and this process has
    // both.
    let dst = H::create_sampling_port(name("s-valid"), 16, PortDirection::Destination, ms(50)).unwrap();
    let src = H::create_sampling_port(name("s-valid"), 16, PortDirection::Source, 1).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(read(dst, &mut buf), Err(ErrorReturnCode::NoAction), "nothing written yet");
    H::write_sampling_message(src, b"first").unwrap();
    H::write_sampling_message(src, b"second").unwrap();
    assert_eq!(read(dst, &mut buf), Ok((Validity::Valid, 6)));
    assert_eq!(&buf[..6], b"second");
    // Through a653rs's own abstraction, which finds the port by name (GET_SAMPLING_PORT_ID and _STATUS).
    let port = SamplingPortDestination::<H>::from_name(Name::from_str("s-valid").unwrap()).unwrap();
    assert_eq!((port.id(), port.size(), port.refresh_period()), (dst, 16, Duration::from_millis(50)));
    assert_eq!(port.receive(&mut buf).unwrap(), (Validity::Valid, &b"second"[..]));
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(read(dst, &mut buf), Ok((Validity::Invalid, 6)), "older than the refresh period");
    assert_eq!(port.status().last_msg_validity, Validity::Invalid);
    assert_eq!((seen.source.read().messages, seen.destination.read().count(Fault::Stale)), (2, 1));
}

#[test]
fn a_port_asked_for_otherwise_than_the_supervisor_gave_it_is_invalid_config() {
    let seen = channel("s-geometry", PortKind::Sampling, 16, ms(100) as u64);
    let create = |size, direction, refresh| H::create_sampling_port(name("s-geometry"), size, direction, refresh);
    // The wrong direction: partita's ports refuse it and count it where the supervisor looks.
    // (This process has both ends; the source's set answers for the name when the direction is wrong.)
    let q = H::create_queuing_port(name("s-geometry"), 16, 1, PortDirection::Destination, QueuingDiscipline::Fifo);
    assert_eq!(q, Err(ErrorReturnCode::InvalidConfig), "a sampling channel opened as a queuing port");
    assert!(matches!(take_last_error(), Some(ApexError::Port { source: PortError::WrongPort { .. }, .. })));
    assert_eq!(seen.source.read().count(Fault::IllegalOperation), 1);
    // Another size or refresh period than the channel's: refused before the port is opened.
    assert_eq!(create(32, PortDirection::Destination, ms(100)), Err(ErrorReturnCode::InvalidConfig));
    let e = take_last_error().unwrap();
    assert!(e.to_string().contains("maximum message size of 32 bytes, its channel has 16 bytes"), "{e}");
    assert_eq!(create(16, PortDirection::Destination, ms(200)), Err(ErrorReturnCode::InvalidConfig));
    assert!(matches!(take_last_error(), Some(ApexError::Geometry { what: "refresh period", .. })));
    assert_eq!(create(16, PortDirection::Destination, INFINITE_TIME_VALUE), Err(ErrorReturnCode::InvalidConfig));
    // As given: opened; created again: nothing to do.
    let id = create(16, PortDirection::Destination, ms(100)).unwrap();
    assert_eq!(create(16, PortDirection::Destination, ms(100)), Err(ErrorReturnCode::NoAction));
    assert_eq!(H::get_sampling_port_id(name("s-geometry")), Ok(id));
    assert!(create(16, PortDirection::Source, 1).is_ok(), "the source end is given too");
    // A name no channel has.
    assert_eq!(H::create_sampling_port(name("s-nowhere"), 16, PortDirection::Source, 1), Err(ErrorReturnCode::InvalidConfig));
    assert!(matches!(take_last_error(), Some(ApexError::Port { source: PortError::NoSuchPort { .. }, .. })));
    assert_eq!(H::create_sampling_port([0; 32], 16, PortDirection::Source, 1), Err(ErrorReturnCode::InvalidConfig), "an empty name");
}

#[test]
fn operations_against_a_port_s_direction_or_size_are_refused_with_their_arinc_codes() {
    channel("s-misuse", PortKind::Sampling, 8, ms(100) as u64);
    channel("q-misuse", PortKind::Queuing, 8, 2);
    let s_src = H::create_sampling_port(name("s-misuse"), 8, PortDirection::Source, 1).unwrap();
    let s_dst = H::create_sampling_port(name("s-misuse"), 8, PortDirection::Destination, ms(100)).unwrap();
    let q_src = H::create_queuing_port(name("q-misuse"), 8, 2, PortDirection::Source, QueuingDiscipline::Fifo).unwrap();
    let q_dst = H::create_queuing_port(name("q-misuse"), 8, 2, PortDirection::Destination, QueuingDiscipline::Fifo).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(H::write_sampling_message(s_dst, b"x"), Err(ErrorReturnCode::InvalidMode));
    assert_eq!(read(s_src, &mut buf), Err(ErrorReturnCode::InvalidMode));
    assert_eq!(H::send_queuing_message(q_dst, b"x", 0), Err(ErrorReturnCode::InvalidMode));
    assert_eq!(receive(q_src, 0, &mut buf), Err(ErrorReturnCode::InvalidMode));
    assert_eq!(H::clear_queuing_port(q_src), Err(ErrorReturnCode::InvalidMode));
    assert_eq!(H::write_sampling_message(s_src, b""), Err(ErrorReturnCode::InvalidParam), "an empty message");
    assert_eq!(H::write_sampling_message(s_src, &[0; 9]), Err(ErrorReturnCode::InvalidConfig), "longer than the channel");
    assert_eq!(H::send_queuing_message(q_src, &[0; 9], 0), Err(ErrorReturnCode::InvalidConfig));
    assert_eq!(H::write_sampling_message(9999, b"x"), Err(ErrorReturnCode::InvalidParam), "no such id");
    assert!(matches!(take_last_error(), Some(ApexError::UnknownId { id: 9999, .. })));
    assert_eq!(H::send_queuing_message(0, b"x", 0), Err(ErrorReturnCode::InvalidParam));
    // A buffer shorter than the message: refused, and the message stays queued.
    H::send_queuing_message(q_src, b"12345678", 0).unwrap();
    assert_eq!(receive(q_dst, 0, &mut buf[..4]), Err(ErrorReturnCode::InvalidParam));
    assert_eq!(receive(q_dst, 0, &mut buf), Ok((8, false)));
}

#[test]
fn a_queue_delivers_in_order_and_a_full_one_is_not_available_and_counted_as_an_overflow() {
    let seen = channel("q-order", PortKind::Queuing, 16, 3);
    let src = H::create_queuing_port(name("q-order"), 16, 3, PortDirection::Source, QueuingDiscipline::Fifo).unwrap();
    let dst = H::create_queuing_port(name("q-order"), 16, 3, PortDirection::Destination, QueuingDiscipline::Fifo).unwrap();
    assert_eq!(H::get_queuing_port_id(name("q-order")), Ok(src));
    for m in [&b"a"[..], b"bb", b"ccc"] {
        H::send_queuing_message(src, m, 0).unwrap();
    }
    assert_eq!(H::send_queuing_message(src, b"d", 0), Err(ErrorReturnCode::NotAvailable), "full, no waiting");
    assert_eq!(seen.source.read().count(Fault::Overflow), 1);
    let status = H::get_queuing_port_status(dst).unwrap();
    assert_eq!((status.nb_message, status.max_nb_message, status.max_message_size, status.port_direction), (3, 3, 16, PortDirection::Destination));
    let mut buf = [0u8; 16];
    for m in [&b"a"[..], b"bb", b"ccc"] {
        let (len, overflow) = receive(dst, 0, &mut buf).unwrap();
        assert_eq!((&buf[..len as usize], overflow), (m, false));
    }
    assert_eq!(receive(dst, 0, &mut buf), Err(ErrorReturnCode::NotAvailable), "empty, no waiting");
    // CLEAR_QUEUING_PORT drops what waits.
    H::send_queuing_message(src, b"old", 0).unwrap();
    H::send_queuing_message(src, b"older", 0).unwrap();
    H::clear_queuing_port(dst).unwrap();
    assert_eq!(H::get_queuing_port_status(dst).unwrap().nb_message, 0);
    H::send_queuing_message(src, b"new", 0).unwrap();
    assert_eq!(receive(dst, 0, &mut buf), Ok((3, false)));
    assert_eq!(&buf[..3], b"new");
}

#[test]
fn queuing_timeouts_wait_as_long_as_asked_and_an_infinite_one_until_the_other_end_acts() {
    channel("q-time", PortKind::Queuing, 16, 1);
    let src = H::create_queuing_port(name("q-time"), 16, 1, PortDirection::Source, QueuingDiscipline::Fifo).unwrap();
    let dst = H::create_queuing_port(name("q-time"), 16, 1, PortDirection::Destination, QueuingDiscipline::Fifo).unwrap();
    let mut buf = [0u8; 16];
    let t = Instant::now();
    assert_eq!(receive(dst, ms(30), &mut buf), Err(ErrorReturnCode::TimedOut));
    assert!(t.elapsed() >= Duration::from_millis(30), "{:?}", t.elapsed());
    H::send_queuing_message(src, b"x", 0).unwrap();
    let t = Instant::now();
    assert_eq!(H::send_queuing_message(src, b"y", ms(30)), Err(ErrorReturnCode::TimedOut), "full for longer than the timeout");
    assert!(t.elapsed() >= Duration::from_millis(30), "{:?}", t.elapsed());
    assert_eq!(receive(dst, 0, &mut buf), Ok((1, false)));
    // INFINITE_TIME_VALUE: the receiver waits until the sender sends, counted as a waiting process meanwhile.
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 16];
        let (len, _) = receive(dst, INFINITE_TIME_VALUE, &mut buf).unwrap();
        buf[..len as usize].to_vec()
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while H::get_queuing_port_status(dst).unwrap().waiting_processes != 1 {
        assert!(Instant::now() < deadline, "the receiver never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!receiver.is_finished());
    H::send_queuing_message(src, b"wake", 0).unwrap();
    assert_eq!(receiver.join().unwrap(), b"wake");
    assert_eq!(H::get_queuing_port_status(dst).unwrap().waiting_processes, 0);
}

#[test]
fn time_is_the_monotonic_clock_and_waits_keep_their_delay() {
    let before = partita_os::clock::monotonic_ns() as i64;
    let now = H::get_time();
    assert!(now >= before && now - before < ms(100), "{before} {now}");
    let t = Instant::now();
    H::timed_wait(ms(20)).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(20));
    H::timed_wait(0).unwrap();
    assert_eq!(H::timed_wait(INFINITE_TIME_VALUE), Err(ErrorReturnCode::InvalidParam));
    // This thread is no process of the partition, which is not in NORMAL mode.
    assert_eq!(<H as ApexTimeP4>::periodic_wait(), Err(ErrorReturnCode::InvalidMode));
    assert_eq!(H::replenish(ms(10)), Err(ErrorReturnCode::NoAction));
}

#[test]
fn the_partition_starts_cold_and_refuses_what_arinc_653_refuses_during_cold_start() {
    let status = H::get_partition_status();
    assert_eq!((status.operating_mode, status.start_condition), (OperatingMode::ColdStart, StartCondition::NormalStart));
    assert!(status.num_assigned_cores >= 1);
    assert_eq!(H::set_partition_mode(OperatingMode::WarmStart), Err(ErrorReturnCode::InvalidMode));
}

extern "C" fn never_started() {}

fn attributes(process: &str, period: ApexSystemTime, time_capacity: ApexSystemTime, base_priority: Priority) -> ApexProcessAttribute {
    ApexProcessAttribute { period, time_capacity, entry_point: never_started, stack_size: 4096, base_priority, deadline: Deadline::Soft, name: name(process) }
}

#[test]
fn process_attributes_are_checked_as_arinc_653_checks_them() {
    let id = H::create_process(&attributes("p-periodic", ms(10), ms(5), 1)).unwrap();
    assert_eq!(H::create_process(&attributes("p-periodic", ms(10), ms(5), 1)), Err(ErrorReturnCode::NoAction), "the same name again");
    assert!(H::create_process(&attributes("p-aperiodic", INFINITE_TIME_VALUE, INFINITE_TIME_VALUE, 239)).unwrap() != id);
    assert_eq!(H::create_process(&attributes("p-priority", ms(10), ms(5), 0)), Err(ErrorReturnCode::InvalidParam));
    assert_eq!(H::create_process(&attributes("p-capacity", ms(10), ms(20), 1)), Err(ErrorReturnCode::InvalidParam), "capacity beyond the period");
    assert_eq!(H::create_process(&attributes("p-zero", 0, ms(5), 1)), Err(ErrorReturnCode::InvalidParam), "a period of 0");
    assert!(take_last_error().unwrap().to_string().contains("a period of 0"));
    assert_eq!(H::start(-5), Err(ErrorReturnCode::InvalidParam));
}

#[test]
fn application_messages_are_limited_to_128_bytes_and_only_application_errors_are_raised() {
    H::report_application_message(b"a message from the services test").unwrap();
    assert_eq!(H::report_application_message(&[b'x'; 129]), Err(ErrorReturnCode::InvalidParam));
    // Refused, so the process goes on (an accepted one would end it).
    assert_eq!(H::raise_application_error(ErrorCode::DeadlineMissed, b"no"), Err(ErrorReturnCode::InvalidParam));
    assert_eq!(H::raise_application_error(ErrorCode::ApplicationError, &[b'x'; 129]), Err(ErrorReturnCode::InvalidParam));
}
