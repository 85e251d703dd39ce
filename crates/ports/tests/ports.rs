//! Sampling and queuing ports between two ends in one process, honest and hostile.
use partita_os::shm::Mapping;
use partita_ports::layout::{self, HEADER};
use partita_ports::*;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn channel(kind: PortKind, max: u32, depth: u64) -> ChannelMemory {
    ChannelMemory::create("t", kind, max, depth).unwrap()
}

fn status() -> (std::os::fd::OwnedFd, StatusReader) {
    let fd = create_status("t").unwrap();
    let r = StatusReader::for_supervisor(&fd).unwrap();
    (fd, r)
}

fn sampling(max: u32, refresh: Duration) -> (SamplingSource, SamplingDestination, StatusReader, Mapping) {
    let c = channel(PortKind::Sampling, max, 1);
    let (s1, _) = status();
    let (s2, seen) = status();
    let hostile = Mapping::map(&c.data, true).unwrap();
    let src = SamplingSource::open("pos", max, c.source(s1).unwrap()).unwrap();
    let dst = SamplingDestination::open("pos", max, refresh, c.destination(s2).unwrap()).unwrap();
    (src, dst, seen, hostile)
}

fn queuing(max: u32, depth: u64) -> (QueuingSource, QueuingDestination, StatusReader, StatusReader, Mapping) {
    let c = channel(PortKind::Queuing, max, depth);
    let (s1, src_seen) = status();
    let (s2, dst_seen) = status();
    let hostile = Mapping::map(&c.data, true).unwrap();
    let src = QueuingSource::open("q", max, depth, c.source(s1).unwrap()).unwrap();
    let dst = QueuingDestination::open("q", max, depth, c.destination(s2).unwrap()).unwrap();
    (src, dst, src_seen, dst_seen, hostile)
}

#[test]
fn a_sampling_read_returns_the_latest_message_with_its_age_and_validity() {
    let (mut src, mut dst, seen, _) = sampling(64, Duration::from_millis(50));
    let mut buf = [0u8; 64];
    assert!(matches!(dst.read(&mut buf), Err(PortError::Empty { .. })));
    src.write(b"first").unwrap();
    src.write(b"second").unwrap();
    let s = dst.read(&mut buf).unwrap();
    assert_eq!(&buf[..s.len], b"second");
    assert_eq!((s.validity, s.sequence), (Validity::Valid, 2));
    assert!(s.age < Duration::from_millis(50));
    // Read again: the same message, older.
    std::thread::sleep(Duration::from_millis(60));
    let s = dst.read(&mut buf).unwrap();
    assert_eq!((&buf[..s.len], s.validity), (&b"second"[..], Validity::Invalid));
    assert!(s.age >= Duration::from_millis(60));
    assert_eq!(seen.read().count(Fault::Stale), 1);
    assert_eq!(seen.read().messages, 2);
}

#[test]
fn a_message_longer_than_the_channel_is_refused_and_counted() {
    let (mut src, _dst, _, _) = sampling(8, Duration::from_secs(1));
    assert!(matches!(src.write(&[0; 9]), Err(PortError::TooLarge { len: 9, max: 8, .. })));
    let (mut q, _qd, seen, _, _) = queuing(8, 2);
    assert!(matches!(q.send(&[0; 9], Timeout::Immediate), Err(PortError::TooLarge { .. })));
    assert_eq!(seen.read().count(Fault::TooLarge), 1);
}

#[test]
fn a_sampling_writer_writing_in_place_is_read_like_a_copy() {
    let (mut src, mut dst, _, _) = sampling(16, Duration::from_secs(1));
    src.write_with(4, |b| b.copy_from_slice(b"abcd")).unwrap();
    let mut buf = [0u8; 16];
    let s = dst.read(&mut buf).unwrap();
    assert_eq!(&buf[..s.len], b"abcd");
}

#[test]
fn a_hostile_sampling_writer_cannot_make_a_reader_read_out_of_bounds_or_spin_forever() {
    let (mut src, mut dst, seen, hostile) = sampling(16, Duration::from_secs(1));
    src.write(b"ok").unwrap();
    let slot = HEADER + layout::sampling_slot(16); // latest = 1 → slot 1
    let mut buf = [0u8; 16];
    // A length beyond the channel's maximum.
    hostile.store32(slot + layout::S_LEN, u32::MAX, Ordering::Release);
    assert!(matches!(dst.read(&mut buf), Err(PortError::TooLarge { .. })));
    // A write that never ends (its sequence left odd).
    hostile.store32(slot + layout::S_LEN, 2, Ordering::Release);
    hostile.store64(slot + layout::S_SEQ, 7, Ordering::Release);
    let t = Instant::now();
    assert!(matches!(dst.read(&mut buf), Err(PortError::PeerFault { .. })));
    assert!(t.elapsed() < Duration::from_millis(100), "bounded retries");
    // A write time in the future.
    hostile.store64(slot + layout::S_SEQ, 8, Ordering::Release);
    hostile.store64(slot + layout::S_WRITTEN, u64::MAX, Ordering::Release);
    assert!(matches!(dst.read(&mut buf), Err(PortError::PeerFault { .. })));
    // Any latest count still lands in one of the two slots (here the one with the future write time).
    hostile.store64(layout::S_LATEST, u64::MAX, Ordering::Release);
    assert!(matches!(dst.read(&mut buf), Err(PortError::PeerFault { .. })));
    let s = seen.read();
    assert_eq!((s.count(Fault::TooLarge), s.count(Fault::PeerFault)), (1, 3));
    // The writer's next message is read again.
    src.write(b"again").unwrap();
    let s = dst.read(&mut buf).unwrap();
    assert_eq!(&buf[..s.len], b"again");
}

#[test]
fn a_queue_delivers_in_order_and_a_full_one_counts_an_overflow() {
    let (mut src, mut dst, src_seen, _, _) = queuing(32, 3);
    for m in [&b"a"[..], b"bb", b"ccc"] {
        src.send(m, Timeout::Immediate).unwrap();
    }
    assert!(matches!(src.send(b"d", Timeout::Immediate), Err(PortError::Full { depth: 3, .. })));
    assert_eq!(src_seen.read().count(Fault::Overflow), 1);
    assert_eq!(dst.pending().unwrap(), 3);
    let mut buf = [0u8; 32];
    for m in [&b"a"[..], b"bb", b"ccc"] {
        let r = dst.receive(&mut buf, Timeout::Immediate).unwrap();
        assert_eq!(&buf[..r.len], m);
    }
    assert!(matches!(dst.receive(&mut buf, Timeout::Immediate), Err(PortError::Empty { .. })));
    // Counters wrap: many more messages than the depth keep their order.
    for i in 0u32..1000 {
        src.send(&i.to_le_bytes(), Timeout::Immediate).unwrap();
        let r = dst.receive(&mut buf, Timeout::Immediate).unwrap();
        assert_eq!(&buf[..r.len], i.to_le_bytes());
    }
}

#[test]
fn a_timeout_is_kept_and_a_blocked_receiver_wakes_on_a_send() {
    let (mut src, mut dst, src_seen, _, _) = queuing(32, 1);
    let mut buf = [0u8; 32];
    let t = Instant::now();
    assert!(matches!(dst.receive(&mut buf, Timeout::After(Duration::from_millis(30))), Err(PortError::TimedOut { .. })));
    assert!(t.elapsed() >= Duration::from_millis(30));
    src.send(b"x", Timeout::Immediate).unwrap();
    let t = Instant::now();
    assert!(matches!(src.send(b"y", Timeout::After(Duration::from_millis(30))), Err(PortError::TimedOut { .. })));
    assert!(t.elapsed() >= Duration::from_millis(30));
    assert_eq!(src_seen.read().count(Fault::Overflow), 1);
    dst.receive(&mut buf, Timeout::Immediate).unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 32];
        let r = dst.receive(&mut buf, Timeout::Infinite).unwrap();
        (buf[..r.len].to_vec(), dst)
    });
    std::thread::sleep(Duration::from_millis(20));
    src.send(b"wake", Timeout::Immediate).unwrap();
    let (got, mut dst) = receiver.join().unwrap();
    assert_eq!(got, b"wake");
    // And a blocked sender wakes when the receiver makes room.
    src.send(b"fill", Timeout::Immediate).unwrap();
    let sender = std::thread::spawn(move || src.send(b"later", Timeout::After(Duration::from_secs(5))).is_ok());
    std::thread::sleep(Duration::from_millis(20));
    assert!(!sender.is_finished(), "the sender waits for room");
    assert_eq!(dst.receive(&mut buf, Timeout::Immediate).unwrap().len, 4);
    assert!(sender.join().unwrap());
    let r = dst.receive(&mut buf, Timeout::Immediate).unwrap();
    assert_eq!(&buf[..r.len], b"later");
}

#[test]
fn a_hostile_queue_writer_only_fills_its_own_queue_and_garbage_is_reported_not_followed() {
    let (mut src, mut dst, _, dst_seen, hostile) = queuing(16, 4);
    let mut buf = [0u8; 16];
    // A flood: the sender is refused once its queue is full; nothing else is touched.
    let sent = (0..100).filter(|_| src.send(b"flood", Timeout::Immediate).is_ok()).count();
    assert_eq!(sent, 4);
    // A length beyond the maximum: reported, the slot dropped, the next message read.
    hostile.store32(HEADER + layout::Q_LEN, 1 << 30, Ordering::Release);
    assert!(matches!(dst.receive(&mut buf, Timeout::Immediate), Err(PortError::TooLarge { .. })));
    assert_eq!(dst.receive(&mut buf, Timeout::Immediate).unwrap().len, 5);
    // A tail more than a queue ahead: refused, nothing taken.
    hostile.store32(layout::Q_TAIL, 1000, Ordering::Release);
    assert!(matches!(dst.receive(&mut buf, Timeout::After(Duration::from_millis(10))), Err(PortError::PeerFault { .. })));
    // A sender that says it waits when it does not: the receiver only makes a wake-up call for nothing.
    hostile.store32(layout::Q_TAIL, 4, Ordering::Release);
    hostile.store32(layout::Q_SENDER_WAITING, 1, Ordering::Release);
    assert_eq!(dst.receive(&mut buf, Timeout::Immediate).unwrap().len, 5);
    let s = dst_seen.read();
    assert_eq!((s.count(Fault::TooLarge), s.count(Fault::PeerFault)), (1, 1));
}

#[test]
fn a_read_only_end_cannot_be_mapped_for_writing() {
    let c = channel(PortKind::Queuing, 16, 2);
    let (s, _) = status();
    let d = c.destination(s).unwrap();
    assert!(Mapping::map(&d.data, true).is_err(), "a destination writes no message");
    let (s, _) = status();
    let src = c.source(s).unwrap();
    assert!(Mapping::map(src.ack.as_ref().unwrap(), true).is_err(), "a source writes no acknowledgement");
}

#[test]
fn opening_a_port_not_given_or_the_wrong_way_is_an_illegal_operation() {
    let c = channel(PortKind::Sampling, 16, 1);
    let sfd = create_status("t").unwrap();
    let seen = StatusReader::for_supervisor(&sfd).unwrap();
    let entry = PortEntry { name: "pos".into(), kind: PortKind::Sampling, direction: Direction::Destination, max_message: 16, depth_or_refresh: 1_000_000, data_fd: 3, status_fd: 4, ack_fd: None };
    let mut ports = Ports::from_fds(vec![(entry, c.destination(sfd).unwrap())]);
    assert!(matches!(ports.sampling_source("pos"), Err(PortError::WrongPort { .. })));
    assert!(matches!(ports.queuing_destination("pos"), Err(PortError::WrongPort { .. })));
    assert!(matches!(ports.sampling_destination("other"), Err(PortError::NoSuchPort { .. })));
    let _open = ports.sampling_destination("pos").unwrap();
    assert!(matches!(ports.sampling_destination("pos"), Err(PortError::AlreadyOpen { .. })));
    assert_eq!(seen.read().count(Fault::IllegalOperation), 4);
}
