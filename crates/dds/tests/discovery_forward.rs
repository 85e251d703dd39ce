//! Forwarding a type partita has never compiled: a Python program writes a keyed topic on one domain; partita
//! discovers the writer, resolves its type from discovery, and forwards the serialized samples to a second
//! domain, where they arrive as distinct instances with their dispose and their original source timestamps.
mod common;
use common::{domain, Camera};
use partita_dds::{
    qos::History, DomainConfig, EndpointKind, EndpointWatcher, InstanceState, Participant, Qos, RawReader, RawTopic, RawWriter,
    Reader, Topic, TopicDescriptor,
};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn python() -> PathBuf {
    let p = std::env::var_os("PARTITA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python"));
    assert!(p.exists(), "{} not found: run scripts/setup.sh", p.display());
    p
}

#[test]
fn forwards_a_discovered_keyed_type_between_domains() {
    let qos = Qos::reliable().history(History::KeepAll).transient_local();
    let src_cfg = DomainConfig::loopback(domain(20));
    let dst_cfg = DomainConfig::loopback(domain(21));
    let src = Participant::new(&src_cfg).unwrap();
    let dst = Participant::new(&dst_cfg).unwrap();
    let watcher = EndpointWatcher::new(&src, EndpointKind::Publication).unwrap();
    let own = src.guid().unwrap();

    let mut child = Command::new(python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/camera_peer.py"))
        .args(["pub", &src_cfg.domain_id.to_string()])
        .env("CYCLONEDDS_URI", src_cfg.to_cyclone_config().unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();

    let end = Instant::now() + Duration::from_secs(20);
    let ep = loop {
        assert!(Instant::now() < end, "the Python writer was never discovered");
        watcher.wait(Duration::from_millis(200)).unwrap();
        if let Some(ep) = watcher
            .take()
            .unwrap()
            .into_iter()
            .find(|e| e.alive && e.topic_name == "cameras" && e.participant_prefix() != own.prefix())
        {
            break ep;
        }
    };
    assert_eq!(ep.type_name, "partita::test::Camera");
    assert!(ep.has_type_info());
    assert!(ep.qos.durability.is_some());

    let desc = TopicDescriptor::resolve(&src, &ep, Duration::from_secs(10)).unwrap();
    assert_eq!(desc.key_count(), 1, "the Camera type has one key field");
    let src_topic = RawTopic::with_descriptor(&src, "cameras", &desc, &qos).unwrap();
    let dst_topic = RawTopic::with_descriptor(&dst, "cameras", &desc, &qos).unwrap();
    assert!(src_topic.is_keyed() && dst_topic.is_keyed());

    // The far side: partita's own typed reader (same type name and structure, declared from Rust).
    let far_topic = Topic::<Camera>::new(&dst, "cameras", &qos).unwrap();
    let far = Reader::new(&far_topic, &qos).unwrap();
    let fwd_w = RawWriter::new(&dst_topic, &qos).unwrap();
    fwd_w.wait_for_readers(1, Duration::from_secs(10)).unwrap();
    let fwd_r = RawReader::new(&src_topic, &qos).unwrap();

    let mut forwarded = Vec::new();
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(20);
    // A reader folds a dispose into an unread data sample of the same instance (which then reports the disposed
    // state) or delivers it as a separate notification: either way, the instance's state tells.
    let done = |got: &Vec<partita_dds::Sample<Camera>>| {
        got.iter().filter(|s| s.value.is_some()).count() == 3 && got.iter().any(|s| s.info.instance_state == InstanceState::Disposed)
    };
    while !done(&got) && Instant::now() < end {
        fwd_r.wait(Duration::from_millis(50)).unwrap();
        let batch = fwd_r.take().unwrap();
        fwd_w.forward_samples(&batch).unwrap();
        forwarded.extend(batch.iter().map(|s| (s.info.valid_data, s.info.source_timestamp_ns)));
        got.extend(far.take().unwrap());
    }
    drop(fwd_r);
    let _ = child.wait();

    let values: Vec<&Camera> = got.iter().filter_map(|s| s.value.as_ref()).collect();
    assert_eq!(values.len(), 3, "forwarded {forwarded:?}, got {got:?}");
    assert_eq!(values.iter().map(|c| c.id).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(values[2].name, "py-2");
    let handles: std::collections::HashSet<u64> =
        got.iter().filter(|s| s.value.is_some()).map(|s| s.info.instance_handle).collect();
    assert_eq!(handles.len(), 3, "keys must survive forwarding as three instances");
    let disposed: std::collections::HashSet<u64> =
        got.iter().filter(|s| s.info.instance_state == InstanceState::Disposed).map(|s| s.info.instance_handle).collect();
    let cam1 = got.iter().find(|s| s.value.as_ref().map(|c| c.id) == Some(1)).unwrap();
    assert_eq!(disposed, [cam1.info.instance_handle].into_iter().collect(), "only camera 1 is disposed: {got:?}");
    // Source timestamps are the Python writer's, not the forwarder's.
    let written: Vec<i64> = forwarded.iter().filter(|(valid, _)| *valid).map(|(_, t)| *t).collect();
    let seen: Vec<i64> = got.iter().filter(|s| s.value.is_some()).map(|s| s.info.source_timestamp_ns).collect();
    assert_eq!(written, seen);
}
