//! Topics, writers and readers: typed (serde + XCDR1) and raw (serialized samples, for routing).
//!
//! Handles: Cyclone looks every `dds_entity_t` up in its handle table (`dds_entity_pin`) and answers a stale or
//! wrong one with an error code, so a call that takes only handles and plain values (a "handle-only call" in
//! the SAFETY comments) has no memory-safety precondition. Pointers are another matter: each SAFETY comment says
//! where they point, for how long, and who frees what.
use crate::error::{check, cstring, DdsError, Result};
use crate::participant::{Participant, ParticipantInner};
use crate::qos::Qos;
use crate::types::{topic_descriptor, TopicType, TypeShape};
use cyclors::*;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// A Cyclone entity we created, deleted on drop, keeping its parent alive until then.
pub(crate) struct Entity {
    pub(crate) handle: dds_entity_t,
    pub(crate) what: String,
    pub(crate) _parent: Arc<dyn Send + Sync>,
}

impl Drop for Entity {
    fn drop(&mut self) {
        // SAFETY: handle-only call. We created this entity and delete it here, once; its parent is still alive
        // (held in _parent, released after this). dds_delete also waits for the entity's listener calls in
        // progress, which ListeningReader relies on.
        unsafe {
            dds_delete(self.handle);
        }
    }
}

/// A topic of a participant. `T` is the sample type for typed topics, `()` for raw ones.
pub struct Topic<T = ()> {
    entity: Arc<Entity>,
    participant: Arc<ParticipantInner>,
    name: String,
    type_name: String,
    keyed: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Topic<T> {
    fn clone(&self) -> Self {
        Topic {
            entity: self.entity.clone(),
            participant: self.participant.clone(),
            name: self.name.clone(),
            type_name: self.type_name.clone(),
            keyed: self.keyed,
            _t: PhantomData,
        }
    }
}

/// A topic whose samples are handled as serialized CDR, without a compiled-in type.
pub type RawTopic = Topic<()>;

impl<T> Topic<T> {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn type_name(&self) -> &str {
        &self.type_name
    }
    pub fn is_keyed(&self) -> bool {
        self.keyed
    }
}

impl<T: TopicType> Topic<T> {
    /// Creates the topic `name` for the Rust type `T`, declaring `T`'s structure and keys to Cyclone.
    pub fn new(participant: &Participant, name: &str, qos: &Qos) -> Result<Self> {
        let shape = TypeShape::of::<T>()?;
        let cname = cstring("topic name", name)?;
        let raw_qos = qos.to_raw()?;
        // Last of the fallible steps before the topic: an error above must not leak the descriptor.
        let desc = topic_descriptor(&shape, participant.handle())?;
        // SAFETY: desc is the valid descriptor topic_descriptor allocated with dds_create_topic_descriptor, ours
        // alone; cname and raw_qos are alive for the call. dds_create_topic copies what it keeps of the
        // descriptor (type name, ops and keys, in dds_sertype_default_init), so we delete it right after, once,
        // with the function dds.h names for it, whatever the outcome.
        let handle = unsafe {
            let h = dds_create_topic(participant.handle(), desc, cname.as_ptr(), raw_qos.as_ptr(), std::ptr::null());
            dds_delete_topic_descriptor(desc);
            h
        };
        check(handle, "dds_create_topic", || format!("topic {name} ({})", shape.type_name))?;
        Ok(Topic {
            entity: Arc::new(Entity { handle, what: format!("topic {name}"), _parent: participant.inner.clone() }),
            participant: participant.inner.clone(),
            name: name.into(),
            type_name: shape.type_name.clone(),
            keyed: shape.is_keyed(),
            _t: PhantomData,
        })
    }
}

impl RawTopic {
    /// A keyless topic of opaque serialized samples with the given DDS type name. Samples written on it must be
    /// complete CDR encodings (header included) of that type, as another DDS program expects them.
    pub fn keyless(participant: &Participant, name: &str, type_name: &str) -> Result<Self> {
        let cname = cstring("topic name", name)?;
        let ctype = cstring("type name", type_name)?;
        // SAFETY: both are NUL-terminated strings alive for the call. cdds_create_blob_topic (cyclors'
        // cdds_blob.c) only reads them despite its `char *` parameters: ddsi_sertype_init_flags duplicates the
        // type name and dds_create_topic_sertype copies the topic name.
        let handle = unsafe {
            cdds_create_blob_topic(participant.handle(), cname.as_ptr() as *mut _, ctype.as_ptr() as *mut _, true)
        };
        check(handle, "cdds_create_blob_topic", || format!("topic {name} ({type_name})"))?;
        Ok(Self::from_parts(participant, handle, name, type_name, false))
    }
}

impl RawTopic {
    /// A keyed topic of opaque serialized samples whose instances are told apart by the key hash the wire
    /// carries (see `keyhash.rs`): for routing a keyed topic whose type nobody announced. Its readers ask
    /// writers for key hashes; [`SampleInfo::key_hash`] gives each sample's, and a [`RawWriter`] of the topic
    /// sends it on.
    pub fn keyed_by_hash(participant: &Participant, name: &str, type_name: &str) -> Result<Self> {
        let cname = cstring("topic name", name)?;
        let ctype = cstring("type name", type_name)?;
        let mut st = crate::keyhash::new_sertype(&ctype);
        // SAFETY: st is a fresh sertype of ours; cname is a NUL-terminated string Cyclone copies; no QoS,
        // listener or plist (null). On success Cyclone owns the sertype (and may point st at an equal one it
        // already had); on failure it is still ours and freed below.
        let handle = unsafe { dds_create_topic_sertype(participant.handle(), cname.as_ptr(), &mut st, std::ptr::null(), std::ptr::null(), std::ptr::null()) };
        if handle < 0 {
            // SAFETY: Cyclone did not take st (the call failed), so it is ours to free, once.
            unsafe { crate::keyhash::free(st) };
        }
        check(handle, "dds_create_topic_sertype", || format!("topic {name} ({type_name}) by key hash"))?;
        Ok(Self::from_parts(participant, handle, name, type_name, true))
    }

    pub(crate) fn from_parts(participant: &Participant, handle: dds_entity_t, name: &str, type_name: &str, keyed: bool) -> Self {
        Topic {
            entity: Arc::new(Entity { handle, what: format!("topic {name}"), _parent: participant.inner.clone() }),
            participant: participant.inner.clone(),
            name: name.into(),
            type_name: type_name.into(),
            keyed,
            _t: PhantomData,
        }
    }
}

impl<T: TopicType> Topic<T> {
    /// The same topic handled as raw serialized samples (for tools that pass bytes through).
    pub fn as_raw(&self) -> RawTopic {
        Topic {
            entity: self.entity.clone(),
            participant: self.participant.clone(),
            name: self.name.clone(),
            type_name: self.type_name.clone(),
            keyed: self.keyed,
            _t: PhantomData,
        }
    }
}

/// Metadata of a received sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleInfo {
    /// False for a dispose or unregister notification, which carries only the key.
    pub valid_data: bool,
    pub instance_state: InstanceState,
    /// The writer's source timestamp, ns since the Unix epoch.
    pub source_timestamp_ns: i64,
    pub instance_handle: u64,
    pub publication_handle: u64,
    /// How many samples of the same instance follow this one in the same take (0: the last of its instance).
    pub sample_rank: u32,
    /// The instance's key hash as the wire gave it, for a topic made with [`RawTopic::keyed_by_hash`].
    pub key_hash: Option<[u8; 16]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    Alive,
    Disposed,
    NoWriters,
}

impl From<&dds_sample_info_t> for SampleInfo {
    fn from(si: &dds_sample_info_t) -> Self {
        SampleInfo {
            valid_data: si.valid_data,
            instance_state: if si.instance_state == dds_instance_state_DDS_IST_NOT_ALIVE_DISPOSED {
                InstanceState::Disposed
            } else if si.instance_state == dds_instance_state_DDS_IST_NOT_ALIVE_NO_WRITERS {
                InstanceState::NoWriters
            } else {
                InstanceState::Alive
            },
            source_timestamp_ns: si.source_timestamp,
            instance_handle: si.instance_handle,
            publication_handle: si.publication_handle,
            sample_rank: si.sample_rank,
            key_hash: None,
        }
    }
}

/// A received sample in serialized form (CDR with its 4-byte header). For invalid samples (dispose/unregister)
/// the bytes hold the key fields only.
#[derive(Debug, Clone)]
pub struct RawSample {
    pub data: Vec<u8>,
    pub info: SampleInfo,
}

/// A received, decoded sample. `value` is `None` for dispose/unregister notifications.
#[derive(Debug, Clone)]
pub struct Sample<T> {
    pub value: Option<T>,
    pub info: SampleInfo,
}

/// What a raw write does to the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Write,
    /// Dispose, given the key fields only.
    Dispose,
    /// Unregister, given the key fields only.
    Unregister,
    /// Write a full sample and dispose its instance in one message.
    WriteDispose,
}

/// How a taken sample is re-published: see [`RawWriter::forward_samples`].
pub fn forward_kind(info: &SampleInfo, last_of_instance: bool) -> WriteKind {
    match (info.valid_data, info.instance_state) {
        (true, InstanceState::Disposed) if last_of_instance => WriteKind::WriteDispose,
        (true, _) => WriteKind::Write,
        (false, InstanceState::Disposed) => WriteKind::Dispose,
        (false, _) => WriteKind::Unregister,
    }
}

/// A writer of serialized samples.
pub struct RawWriter {
    entity: Entity,
    sertype: *const ddsi_sertype,
    keyed: bool,
    /// The topic tells instances apart by key hash ([`RawTopic::keyed_by_hash`]).
    by_key_hash: bool,
}

// SAFETY: the only field that is not Send is `sertype`, a pointer to a Cyclone sertype that stays valid as long
// as the writer in `entity` exists (dds_get_entity_sertype: "at least that of the lifetime of the entity"),
// wherever the RawWriter goes: it is reference-counted, freed by Cyclone, and bound to no thread.
unsafe impl Send for RawWriter {}
// SAFETY: through `&RawWriter`, `sertype` is only passed to ddsi_serdata_from_ser_iov, which reads the immutable
// sertype and allocates a new serdata; Cyclone itself calls it from every receive thread at once. The writer is
// used through handle-only calls, which Cyclone locks.
unsafe impl Sync for RawWriter {}

impl RawWriter {
    pub fn new<T>(topic: &Topic<T>, qos: &Qos) -> Result<Self> {
        let raw_qos = qos.to_raw()?;
        // SAFETY: handles and raw_qos, a QoS object alive for the call that Cyclone copies; no listener (null).
        let handle = unsafe {
            dds_create_writer(topic.participant.handle, topic.entity.handle, raw_qos.as_ptr(), std::ptr::null())
        };
        check(handle, "dds_create_writer", || format!("writer on topic {}", topic.name))?;
        let entity = Entity { handle, what: format!("writer on topic {}", topic.name), _parent: topic.entity.clone() };
        let mut sertype: *const ddsi_sertype = std::ptr::null();
        // SAFETY: sertype is a valid out-parameter. On success Cyclone stores a pointer to the writer's sertype
        // without counting a reference, valid at least as long as the writer (dds.h); the writer is `entity`,
        // which the RawWriter keeps until it drops, and with it stops using the pointer.
        let r = unsafe { dds_get_entity_sertype(handle, &mut sertype) };
        check(r, "dds_get_entity_sertype", || entity.what.clone())?;
        // SAFETY: sertype is the writer's live sertype (above); only its operation table is compared.
        let by_key_hash = unsafe { crate::keyhash::is_our_type(sertype) };
        Ok(RawWriter { entity, sertype, keyed: topic.keyed, by_key_hash })
    }

    /// Writes one sample given as complete CDR (header included).
    pub fn write(&self, cdr: &[u8]) -> Result<()> {
        self.write_kind(cdr, WriteKind::Write)
    }

    /// Writes, disposes or unregisters the instance of the given sample (for dispose/unregister, its key fields
    /// only, as a key-only CDR encoding).
    pub fn write_kind(&self, cdr: &[u8], kind: WriteKind) -> Result<()> {
        self.forward(cdr, kind, None)
    }

    /// Like [`RawWriter::write_kind`], keeping a given source timestamp (ns since the Unix epoch) instead of
    /// stamping the sample now: what a forwarding service does so readers see the original writer's time.
    pub fn forward(&self, cdr: &[u8], kind: WriteKind, source_timestamp_ns: Option<i64>) -> Result<()> {
        self.forward_with_key_hash(cdr, kind, source_timestamp_ns, None)
    }

    /// Like [`RawWriter::forward`], with the sample's key hash when known (a topic made with
    /// [`RawTopic::keyed_by_hash`] sends it on; other topics compute their own from the key fields).
    pub fn forward_with_key_hash(&self, cdr: &[u8], kind: WriteKind, source_timestamp_ns: Option<i64>, key_hash: Option<[u8; 16]>) -> Result<()> {
        let full = matches!(kind, WriteKind::Write | WriteKind::WriteDispose);
        let sd = self.serdata(cdr, if full { ddsi_serdata_kind_SDK_DATA } else { ddsi_serdata_kind_SDK_KEY }, key_hash)?;
        // dds_writecdr and dds_forwardcdr take over our reference to sd (dds_writecdr_impl consumes one in every
        // path once the writer is locked, and our writer is alive, so it locks). A writer that could not be
        // locked, or a topic with a content filter (never made here), would return an error without taking it.
        let r = if kind == WriteKind::Write && source_timestamp_ns.is_none() {
            // SAFETY: sd is a live serdata of this writer's sertype, handed over (above); dds_writecdr stamps it.
            unsafe { dds_writecdr(self.entity.handle, sd) }
        } else {
            let statusinfo = match kind {
                WriteKind::Write => 0,
                WriteKind::Dispose | WriteKind::WriteDispose => DDSI_STATUSINFO_DISPOSE,
                WriteKind::Unregister => DDSI_STATUSINFO_UNREGISTER,
            };
            // SAFETY: dds_time only reads the clock.
            let timestamp = source_timestamp_ns.unwrap_or_else(|| unsafe { dds_time() });
            // SAFETY: sd is non-null (checked by serdata()) and fresh: its one reference is ours and no other
            // thread has seen it, so these plain stores cannot race. dds_forwardcdr uses them as they are.
            unsafe {
                (*sd).statusinfo = statusinfo;
                (*sd).timestamp.v = timestamp;
            }
            // SAFETY: sd is a live serdata of this writer's sertype, handed over (above).
            unsafe { dds_forwardcdr(self.entity.handle, sd) }
        };
        check(r, "dds_writecdr", || self.entity.what.clone()).map(drop)
    }

    /// Forwards one sample as it was taken, with its source timestamp and life cycle, deciding write-and-dispose
    /// from its sample rank (the last of its instance in its take); returns false when there was nothing to
    /// forward (a life-cycle notification of a keyless topic).
    pub fn forward_taken(&self, cdr: &[u8], info: &SampleInfo) -> Result<bool> {
        if !info.valid_data && !self.keyed {
            return Ok(false);
        }
        self.forward_with_key_hash(cdr, forward_kind(info, info.sample_rank == 0), Some(info.source_timestamp_ns), info.key_hash)?;
        Ok(true)
    }

    /// Forwards samples taken from a reader of the same type (on another domain), keeping their source
    /// timestamps and their instance life cycle: a dispose or unregister notification is forwarded as such, and
    /// when the reader folded a dispose into the last data sample of an instance (its instance state is already
    /// disposed), that sample goes out as write-and-dispose. Returns the number of messages written.
    pub fn forward_samples<S: std::borrow::Borrow<RawSample>>(&self, samples: &[S]) -> Result<usize> {
        let mut last_of_instance = std::collections::HashMap::new();
        for (i, s) in samples.iter().enumerate() {
            last_of_instance.insert(s.borrow().info.instance_handle, i);
        }
        let mut written = 0;
        for (i, s) in samples.iter().enumerate() {
            let s = s.borrow();
            if !s.info.valid_data && !self.keyed {
                // A keyless topic has one instance and no key to name in a dispose or unregister.
                continue;
            }
            let last = last_of_instance.get(&s.info.instance_handle) == Some(&i);
            self.forward_with_key_hash(&s.data, forward_kind(&s.info, last), Some(s.info.source_timestamp_ns), s.info.key_hash)?;
            written += 1;
        }
        Ok(written)
    }

    fn serdata(&self, cdr: &[u8], kind: ddsi_serdata_kind, key_hash: Option<[u8; 16]>) -> Result<*mut ddsi_serdata> {
        if self.by_key_hash {
            // SAFETY: self.sertype is this writer's live sertype, one of keyhash.rs (by_key_hash); new_sample
            // copies the bytes and returns a new serdata with one reference, ours.
            return Ok(unsafe { crate::keyhash::new_sample(self.sertype, kind, cdr, key_hash) });
        }
        // iov_len is a usize on Linux: no cast, so that a platform with a narrower one fails to build instead of
        // passing a length that disagrees with `size` below.
        let iov = ddsrt_iovec_t { iov_base: cdr.as_ptr() as *mut _, iov_len: cdr.len() };
        // SAFETY: self.sertype is this writer's sertype, valid while `entity` lives (see RawWriter::new). One iovec
        // describing exactly `cdr`, whose length is also the total size passed: from_ser_iov only reads it and
        // copies the bytes into the new serdata (the default sertype rejects fewer than 4 bytes and checks the
        // rest with dds_stream_normalize; the blob sertype of RawTopic::keyless copies any bytes). It returns a
        // new serdata with one reference, ours, or null.
        let sd = unsafe { ddsi_serdata_from_ser_iov(self.sertype, kind, 1, &iov, cdr.len()) };
        if sd.is_null() {
            return Err(DdsError::Call {
                entity: self.entity.what.clone(),
                call: "ddsi_serdata_from_ser_iov",
                code: DDS_RETCODE_BAD_PARAMETER,
                text: format!("{} bytes are not a valid serialized sample of this topic's type", cdr.len()),
            });
        }
        Ok(sd)
    }

    /// The writer's instance handle: the `publication_handle` its samples carry in a reader's [`SampleInfo`].
    pub fn instance_handle(&self) -> Result<u64> {
        let mut ih: dds_instance_handle_t = 0;
        // SAFETY: handle-only call with one out-parameter, a valid local.
        let r = unsafe { dds_get_instance_handle(self.entity.handle, &mut ih) };
        check(r, "dds_get_instance_handle", || self.entity.what.clone())?;
        Ok(ih)
    }

    /// Sends what a batching writer ([`Qos::writer_batching`]) holds in its outgoing message; without
    /// batching, or with nothing held, there is nothing to send.
    pub fn flush(&self) -> Result<()> {
        // SAFETY: handle-only call; Cyclone locks the writer for it.
        let r = unsafe { dds_write_flush(self.entity.handle) };
        check(r, "dds_write_flush", || self.entity.what.clone()).map(drop)
    }

    /// Number of readers currently matched (discovered and compatible).
    pub fn matched_readers(&self) -> Result<u32> {
        // SAFETY: the status is plain integers, for which all-zero bytes are a valid value.
        let mut st: dds_publication_matched_status_t = unsafe { std::mem::zeroed() };
        // SAFETY: handle-only call with one out-parameter, a valid local of the type Cyclone fills in.
        let r = unsafe { dds_get_publication_matched_status(self.entity.handle, &mut st) };
        check(r, "dds_get_publication_matched_status", || self.entity.what.clone())?;
        Ok(st.current_count)
    }

    /// Waits until at least `n` readers are matched.
    pub fn wait_for_readers(&self, n: u32, timeout: Duration) -> Result<()> {
        let end = std::time::Instant::now() + timeout;
        while self.matched_readers()? < n {
            if std::time::Instant::now() >= end {
                return Err(DdsError::Timeout { what: format!("{} waiting for {n} reader(s)", self.entity.what), timeout });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

/// A typed writer: encodes `T` as XCDR1 and writes it.
pub struct Writer<T> {
    raw: RawWriter,
    buf: std::sync::Mutex<Vec<u8>>,
    _t: PhantomData<fn(T)>,
}

impl<T: TopicType> Writer<T> {
    pub fn new(topic: &Topic<T>, qos: &Qos) -> Result<Self> {
        Ok(Writer { raw: RawWriter::new(topic, qos)?, buf: std::sync::Mutex::new(Vec::new()), _t: PhantomData })
    }
    pub fn write(&self, value: &T) -> Result<()> {
        self.write_kind(value, WriteKind::Write)
    }
    /// Disposes the instance whose key fields `value` carries.
    pub fn dispose(&self, value: &T) -> Result<()> {
        self.write_kind(value, WriteKind::Dispose)
    }
    /// Unregisters this writer from the instance whose key fields `value` carries.
    pub fn unregister(&self, value: &T) -> Result<()> {
        self.write_kind(value, WriteKind::Unregister)
    }
    fn write_kind(&self, value: &T, kind: WriteKind) -> Result<()> {
        let mut buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        buf.clear();
        if kind == WriteKind::Write {
            crate::cdr::to_writer(&mut buf, value)?;
        } else {
            crate::cdr::key_to_writer(&mut buf, value, T::key_fields())?;
        }
        self.raw.write_kind(&buf, kind)
    }
    pub fn raw(&self) -> &RawWriter {
        &self.raw
    }
    pub fn matched_readers(&self) -> Result<u32> {
        self.raw.matched_readers()
    }
    pub fn wait_for_readers(&self, n: u32, timeout: Duration) -> Result<()> {
        self.raw.wait_for_readers(n, timeout)
    }
}

/// A waitset of our own with a read condition (any sample state) on one reader: blocking takes without a
/// listener. Declared after the reader in its owner, so the waitset goes first.
pub(crate) struct ReaderWaitset {
    waitset: dds_entity_t,
    what: String,
}

impl ReaderWaitset {
    /// Creates the waitset under `participant` and attaches a read condition on `reader`.
    pub(crate) fn new(participant: dds_entity_t, reader: &Entity) -> Result<Self> {
        // SAFETY: handle-only call.
        let waitset = unsafe { dds_create_waitset(participant) };
        check(waitset, "dds_create_waitset", || reader.what.clone())?;
        // Deleted on drop from here on, also on the error paths below.
        let ws = ReaderWaitset { waitset, what: reader.what.clone() };
        // SAFETY: handle-only call. The condition belongs to the reader and is deleted with it.
        let cond = unsafe { dds_create_readcondition(reader.handle, DDS_ANY_STATE) };
        check(cond, "dds_create_readcondition", || reader.what.clone())?;
        // SAFETY: handle-only call; the attach argument is a plain value Cyclone never dereferences.
        let r = unsafe { dds_waitset_attach(waitset, cond, 0) };
        check(r, "dds_waitset_attach", || reader.what.clone())?;
        Ok(ws)
    }

    /// Attaches `wakeup`: from then on [`Wakeup::wake`] ends a wait on this waitset at once.
    pub(crate) fn attach(&self, wakeup: &Wakeup) -> Result<()> {
        // SAFETY: handle-only call; the attach argument is a plain value Cyclone never dereferences. The guard
        // condition stays attached until either is deleted.
        let r = unsafe { dds_waitset_attach(self.waitset, wakeup.entity.handle, 1) };
        check(r, "dds_waitset_attach", || self.what.clone()).map(drop)
    }

    /// Blocks until the reader has data or the timeout passes; true if it has data.
    pub(crate) fn wait(&self, timeout: Duration) -> Result<bool> {
        let t = i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX);
        // SAFETY: handle-only call: no attach results are asked for, and a null array with size 0 is how to say so
        // (dds_waitset_wait_impl rejects one without the other). Several threads may wait on one waitset (dds.h).
        let n = unsafe { dds_waitset_wait(self.waitset, std::ptr::null_mut(), 0, t) };
        Ok(check(n, "dds_waitset_wait", || self.what.clone())? > 0)
    }
}

impl Drop for ReaderWaitset {
    fn drop(&mut self) {
        // SAFETY: handle-only call; the waitset is ours and deleted here, once.
        unsafe {
            dds_delete(self.waitset);
        }
    }
}

/// A DDS guard condition: another thread's [`Wakeup::wake`] ends a wait on the waitsets it is attached to
/// (`EndpointWatcher::attach`), so that one thread can wait for discovery news and for a wake-up of its own
/// at once.
pub struct Wakeup {
    entity: Entity,
}

impl Wakeup {
    pub fn new(participant: &Participant) -> Result<Wakeup> {
        let what = "guard condition".to_string();
        // SAFETY: handle-only call.
        let h = unsafe { dds_create_guardcondition(participant.handle()) };
        check(h, "dds_create_guardcondition", || what.clone())?;
        Ok(Wakeup { entity: Entity { handle: h, what, _parent: participant.inner.clone() } })
    }

    /// Triggers the condition: a waiter returns at once, or its next wait does.
    pub fn wake(&self) {
        // SAFETY: handle-only call; Cyclone locks the condition, so any thread may call it.
        unsafe {
            dds_set_guardcondition(self.entity.handle, true);
        }
    }

    /// Resets the condition; true if it had been triggered.
    pub fn take(&self) -> bool {
        let mut triggered = false;
        // SAFETY: handle-only call with one out-parameter, a valid local.
        let r = unsafe { dds_take_guardcondition(self.entity.handle, &mut triggered) };
        r == 0 && triggered
    }
}

/// A reader of serialized samples, with its own waitset for blocking takes.
pub struct RawReader {
    waitset: ReaderWaitset,
    entity: Entity,
    keyed: bool,
}

const TAKE_BATCH: usize = 64;

/// The serdata references one `dds_takecdr` handed over, each released exactly once when this goes out of
/// scope, also when a consumer of the samples panics.
struct TakenSerdata {
    refs: [*mut ddsi_serdata; TAKE_BATCH],
    /// How many entries of `refs`, from the start, hold a reference.
    n: usize,
}

impl Drop for TakenSerdata {
    fn drop(&mut self) {
        for &sd in &self.refs[..self.n] {
            // SAFETY: dds_takecdr stored in refs[..n] one reference per sample taken, which the caller must
            // release with ddsi_serdata_unref (dds.h, dds_takecdr); they are released here only, once each. The
            // reader they came from is alive: a TakenSerdata lives within one take_cdr_batch call on it.
            unsafe { ddsi_serdata_unref(sd) };
        }
    }
}

/// Hands `f` the serialized form (CDR header included) of `sd` without copying it out of Cyclone, or no bytes
/// if the serdata gives none.
///
/// # Safety
/// `sd` must be a complete serdata (not the key-only stand-in of a keyless blob topic, whose size and payload
/// cyclors leaves unset) on which the caller holds a reference for the whole call.
unsafe fn with_serialized(sd: *mut ddsi_serdata, f: impl FnOnce(&[u8])) {
    /// A reference from ddsi_serdata_to_ser_ref, returned on drop.
    struct SerRef {
        sd: *mut ddsi_serdata,
        iov: ddsrt_iovec_t,
    }
    impl Drop for SerRef {
        fn drop(&mut self) {
            // SAFETY: sd and iov are what one ddsi_serdata_to_ser_ref returned and filled in; they are handed
            // back once, here, as ddsi_serdata.h asks ("ref was previously filled by ddsi_serdata_to_ser_ref").
            unsafe { ddsi_serdata_to_ser_unref(self.sd, &self.iov) };
        }
    }
    // SAFETY: sd is a live, complete serdata (caller); get_size only reads it.
    let size = unsafe { ddsi_serdata_size(sd) } as usize;
    let mut iov = ddsrt_iovec_t { iov_base: std::ptr::null_mut(), iov_len: 0 };
    // SAFETY: sd is live and complete (caller) and 0..size is its whole serialized form; iov is a valid out-
    // parameter. On success Cyclone points iov at iov_len bytes that stay valid until the matching
    // ddsi_serdata_to_ser_unref and returns a serdata reference that call releases (ddsi_serdata.h).
    let r = unsafe { ddsi_serdata_to_ser_ref(sd, 0, size, &mut iov) };
    if r.is_null() {
        return f(&[]);
    }
    let held = SerRef { sd: r, iov };
    if held.iov.iov_base.is_null() {
        f(&[])
    } else {
        // SAFETY: iov_base points at iov_len initialised bytes (ddsi_serdata.h, to_ser_ref), which nobody writes
        // (a serdata is immutable once made) and which stay valid until `held` is dropped, after f returns or
        // unwinds; f cannot keep the slice (its lifetime ends with the call).
        f(unsafe { std::slice::from_raw_parts(held.iov.iov_base as *const u8, held.iov.iov_len as usize) })
    }
}

/// Takes up to one batch from `reader` (a reader or condition handle), handing each sample's serialized form to
/// `f`; returns the number taken or Cyclone's error code. Every reference taken is released, also when `f`
/// panics.
fn take_cdr_batch(reader: dds_entity_t, keyed: bool, mut f: impl FnMut(&[u8], SampleInfo)) -> std::result::Result<usize, i32> {
    let mut taken = TakenSerdata { refs: [std::ptr::null_mut(); TAKE_BATCH], n: 0 };
    // SAFETY: dds_sample_info_t is plain data (integers and bools), for which all-zero bytes are a valid value.
    let mut infos: [dds_sample_info_t; TAKE_BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: refs and infos each have room for TAKE_BATCH entries, the maximum asked for; on success Cyclone
    // fills refs[..n] with one serdata reference per sample taken, now ours to release (TakenSerdata), and
    // infos[..n] with their infos. A stale handle only yields an error code.
    let n = unsafe { dds_takecdr(reader, taken.refs.as_mut_ptr(), TAKE_BATCH as u32, infos.as_mut_ptr(), DDS_ANY_STATE) };
    if n < 0 {
        return Err(n);
    }
    taken.n = (n as usize).min(TAKE_BATCH);
    for (&sd, si) in taken.refs[..taken.n].iter().zip(&infos) {
        let mut info = SampleInfo::from(si);
        // SAFETY: sd is one of the references taken above, alive while `taken` holds it; a key-hash sample is
        // checked by its operation table before its key hash is read.
        if unsafe { crate::keyhash::is_ours(sd) } {
            // SAFETY: as above, and it is ours.
            info.key_hash = unsafe { crate::keyhash::key_hash_of(sd) };
            // A dispose or unregister that Cyclone stored as a data sample, so as not to drop it (keyhash.rs).
            // SAFETY: as above.
            if unsafe { crate::keyhash::is_key_only(sd) } {
                info.valid_data = false;
            }
        }
        if !info.valid_data && !keyed {
            // An invalid sample of a keyless topic carries no key. Cyclone hands over the instance's key-only
            // stand-in (the sertype's to_untyped), and the opaque-type sertype behind raw keyless topics
            // (cyclors' cdds_serdata_to_untyped) leaves its size and payload unset: read nothing from it.
            f(&[], info);
        } else {
            // SAFETY: sd is one of the references taken above, held by `taken` until after this call; valid
            // samples and the key-only samples of keyed topics (whose sertype fills in the key) are complete.
            unsafe { with_serialized(sd, |bytes| f(bytes, info)) };
        }
    }
    Ok(taken.n)
}

fn reader_lost_and_rejected(e: &Entity) -> Result<(u64, u64)> {
    // SAFETY: the status is plain integers, for which all-zero bytes are a valid value.
    let mut lost: dds_sample_lost_status_t = unsafe { std::mem::zeroed() };
    // SAFETY: the status is plain integers (its last_reason an enum held as a C integer), so all-zero is valid.
    let mut rej: dds_sample_rejected_status_t = unsafe { std::mem::zeroed() };
    // SAFETY: handle-only call with one out-parameter, a valid local of the type Cyclone fills in.
    let r = unsafe { dds_get_sample_lost_status(e.handle, &mut lost) };
    check(r, "dds_get_sample_lost_status", || e.what.clone())?;
    // SAFETY: handle-only call with one out-parameter, a valid local of the type Cyclone fills in.
    let r = unsafe { dds_get_sample_rejected_status(e.handle, &mut rej) };
    check(r, "dds_get_sample_rejected_status", || e.what.clone())?;
    Ok((lost.total_count as u64, rej.total_count as u64))
}

/// What a listening reader calls, on Cyclone's delivery thread, for every sample taken.
type SampleCallback = Box<dyn FnMut(&[u8], SampleInfo, &MatchedPublications) + Send>;

/// The writers matched with a listening reader, as its callback sees them.
pub struct MatchedPublications {
    reader: dds_entity_t,
}

impl MatchedPublications {
    /// The GUID of the matched writer behind a sample's `publication_handle`; `None` if the reader no longer
    /// knows it.
    pub fn guid(&self, publication_handle: u64) -> Option<crate::guid::Guid> {
        // SAFETY: handle-only call. It returns null or a freshly allocated DCPSPublication sample that the
        // caller owns and frees with dds_builtintopic_free_endpoint (dds.h).
        let ep = unsafe { dds_get_matched_publication_data(self.reader, publication_handle) };
        if ep.is_null() {
            return None;
        }
        // SAFETY: ep is non-null and ours: we read its key (plain bytes), then free it, once, as dds.h says.
        unsafe {
            let guid = crate::guid::Guid::from_bytes((*ep).key.v);
            dds_builtintopic_free_endpoint(ep);
            Some(guid)
        }
    }
}

struct ListenerContext {
    keyed: bool,
    /// The reader, as messages name it.
    what: String,
    callback: std::sync::Mutex<SampleCallback>,
    panics: std::sync::Mutex<CallbackPanics>,
}

/// The panics of a listening reader's callback since the reader was created (see
/// [`ListeningReader::callback_panics`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallbackPanics {
    pub count: u64,
    /// The message of the latest one.
    pub last_message: Option<String>,
}

impl ListenerContext {
    /// Counts and logs a panic of the callback, caught on its way to Cyclone's thread. Never unwinds itself: a
    /// payload that panics when dropped, or a logger that panics, is caught here too.
    fn panicked(&self, payload: Box<dyn std::any::Any + Send>) {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a panic without a message)".into());
        drop_panic_payload(payload);
        let count = {
            let mut p = self.panics.lock().unwrap_or_else(|p| p.into_inner());
            p.count += 1;
            p.last_message = Some(message.clone());
            p.count
        };
        let logged = std::panic::catch_unwind(|| {
            tracing::error!(
                target: "partita::dds::listener",
                reader = %self.what,
                panics = count,
                "the callback panicked on a sample, which is dropped; the reader goes on: {message}"
            )
        });
        if let Err(payload) = logged {
            drop_panic_payload(payload);
        }
    }
}

/// Drops a caught panic's payload without letting a panic of its destructor unwind; such a payload (and the
/// payload of that second panic) is leaked instead.
fn drop_panic_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

extern "C" fn on_data_available(reader: dds_entity_t, arg: *mut std::ffi::c_void) {
    // SAFETY: arg is `Arc::as_ptr` of the ListenerContext its ListeningReader holds, set as this reader's
    // listener argument in ListeningReader::create, so it is non-null, aligned and initialised. It outlives this
    // call: the ListeningReader deletes the reader before it lets go of its Arc, and dds_delete on a reader waits
    // for the listener calls in progress to return and resets the listener before returning (dds_entity.c,
    // really_delete_pinned_closed_locked: waits until m_cb_pending_count is 0). Only shared access is made
    // through it (the callback itself sits behind a Mutex).
    let ctx = unsafe { &*(arg as *const ListenerContext) };
    // Cyclone calls this from C (its receive thread, or a local writer's dds_write): no panic may unwind out of
    // it, which is undefined behaviour up to Rust 1.80 (the workspace's rust-version) and an abort of the whole
    // process since. The callback's panics are caught per sample in `deliver`; this catches anything else.
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(reader, ctx))) {
        ctx.panicked(payload);
    }
}

/// Takes everything the reader has and hands it to the callback, one sample at a time.
fn deliver(reader: dds_entity_t, ctx: &ListenerContext) {
    let mut cb = ctx.callback.lock().unwrap_or_else(|p| p.into_inner());
    let matched = MatchedPublications { reader };
    while let Ok(n) = take_cdr_batch(reader, ctx.keyed, |b, i| {
        // A panic must not unwind into C. Caught per sample, so that the samples after it in the take are still
        // handed over and every sample taken is released; the panic is counted and logged, not swallowed.
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (cb)(b, i, &matched))) {
            ctx.panicked(payload);
        }
    }) {
        if n < TAKE_BATCH {
            break;
        }
    }
}

/// A reader whose samples are handed to a callback as soon as Cyclone delivers them, on its receive thread
/// (Cyclone delivers synchronously there by default): no hand-off to an application thread. The callback must
/// be quick; it may write on other topics (a server replying from it is the intended use). A panic of the
/// callback drops the sample it was handling, is counted and logged, and the reader goes on with the next
/// sample ([`ListeningReader::callback_panics`]); the callback's own state is then as the panic left it.
///
/// Dropping the reader waits for a callback in progress to return, so the callback must not drop its own reader
/// (Cyclone would wait for itself).
pub struct ListeningReader {
    entity: Option<Entity>,
    /// Cyclone holds a pointer to this context as the listener's argument. An Arc rather than a Box: moving a
    /// Box asserts that it is the only way to reach its contents, which Cyclone's pointer, read on another thread
    /// at the same moment, contradicts; an Arc's contents are shared, so moving the reader leaves it valid.
    ctx: Arc<ListenerContext>,
}

impl Drop for ListeningReader {
    fn drop(&mut self) {
        // Delete the reader (waiting for a running callback) before the context it points to goes away.
        drop(self.entity.take());
    }
}

impl ListeningReader {
    /// Creates a reader on `topic` that calls `f(bytes, info)` for every sample taken. `info.sample_rank` tells
    /// whether more samples of the same instance follow in the same take.
    pub fn new<T>(topic: &Topic<T>, qos: &Qos, mut f: impl FnMut(&[u8], SampleInfo) + Send + 'static) -> Result<Self> {
        Self::create(topic, qos, Box::new(move |bytes, info, _| f(bytes, info)))
    }

    /// Like [`ListeningReader::new`]; the callback can also ask who wrote a sample.
    pub fn with_publications<T>(
        topic: &Topic<T>,
        qos: &Qos,
        f: impl FnMut(&[u8], SampleInfo, &MatchedPublications) + Send + 'static,
    ) -> Result<Self> {
        Self::create(topic, qos, Box::new(f))
    }

    /// Samples lost in transport and rejected for lack of room, since the reader was created.
    pub fn lost_and_rejected(&self) -> Result<(u64, u64)> {
        let e = self.entity.as_ref().expect("reader alive until drop");
        reader_lost_and_rejected(e)
    }

    /// The panics of the callback so far: how many, and the latest one's message.
    pub fn callback_panics(&self) -> CallbackPanics {
        self.ctx.panics.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn create<T>(topic: &Topic<T>, qos: &Qos, callback: SampleCallback) -> Result<Self> {
        let raw_qos = qos.to_raw()?;
        let what = format!("listening reader on topic {}", topic.name);
        let ctx = Arc::new(ListenerContext {
            keyed: topic.keyed,
            what: what.clone(),
            callback: std::sync::Mutex::new(callback),
            panics: std::sync::Mutex::new(CallbackPanics::default()),
        });
        let arg = Arc::as_ptr(&ctx) as *mut std::ffi::c_void;
        // SAFETY: dds_create_listener allocates a listener (it aborts rather than return null) carrying `arg`,
        // which Cyclone only stores and passes back to on_data_available; dds_lset_data_available sets the
        // callback in that listener; dds_create_reader reads the listener and the QoS (alive in raw_qos) and
        // copies both into the new reader, so the listener is ours to delete right after, once. The context
        // behind `arg` lives as long as the reader: see on_data_available and Drop.
        let handle = unsafe {
            let l = dds_create_listener(arg);
            dds_lset_data_available(l, Some(on_data_available));
            let h = dds_create_reader(topic.participant.handle, topic.entity.handle, raw_qos.as_ptr(), l);
            dds_delete_listener(l);
            h
        };
        check(handle, "dds_create_reader", || what.clone())?;
        let entity = Entity { handle, what, _parent: topic.entity.clone() };
        Ok(ListeningReader { entity: Some(entity), ctx })
    }

    /// Creates a typed reader whose callback receives decoded samples; a sample that does not decode is
    /// handed over with `value: None` and its info.
    pub fn typed<T: TopicType>(topic: &Topic<T>, qos: &Qos, mut f: impl FnMut(Sample<T>) + Send + 'static) -> Result<Self> {
        let mut q = qos.clone();
        if q.data_representation.is_none() {
            q.data_representation = Some(vec![crate::qos::DataRepresentation::Xcdr1]);
        }
        Self::new(topic, &q, move |bytes, info| {
            let value = if info.valid_data { crate::cdr::from_slice::<T>(bytes).ok() } else { None };
            f(Sample { value, info })
        })
    }
}

impl RawReader {
    pub fn new<T>(topic: &Topic<T>, qos: &Qos) -> Result<Self> {
        let raw_qos = qos.to_raw()?;
        // SAFETY: handles and raw_qos, a QoS object alive for the call that Cyclone copies; no listener (null).
        let handle = unsafe {
            dds_create_reader(topic.participant.handle, topic.entity.handle, raw_qos.as_ptr(), std::ptr::null())
        };
        check(handle, "dds_create_reader", || format!("reader on topic {}", topic.name))?;
        let entity = Entity { handle, what: format!("reader on topic {}", topic.name), _parent: topic.entity.clone() };
        let waitset = ReaderWaitset::new(topic.participant.handle, &entity)?;
        Ok(RawReader { waitset, entity, keyed: topic.keyed })
    }

    /// Takes every available sample (non-blocking).
    pub fn take(&self) -> Result<Vec<RawSample>> {
        let mut out = Vec::new();
        self.take_into(&mut out)?;
        Ok(out)
    }

    /// Appends every available sample to `out`; returns how many were taken.
    pub fn take_into(&self, out: &mut Vec<RawSample>) -> Result<usize> {
        let mut total = 0;
        loop {
            let n = self.take_batch(|data, info| out.push(RawSample { data: data.to_vec(), info }))?;
            total += n;
            if n < TAKE_BATCH {
                return Ok(total);
            }
        }
    }

    /// Takes up to one batch, handing each sample's bytes to `f` without copying them out of Cyclone.
    pub fn take_batch(&self, f: impl FnMut(&[u8], SampleInfo)) -> Result<usize> {
        take_cdr_batch(self.entity.handle, self.keyed, f).map_err(|code| DdsError::Call {
            entity: self.entity.what.clone(),
            call: "dds_takecdr",
            code,
            text: crate::error::retcode_text(code),
        })
    }

    /// Blocks until data is available or the timeout passes; true if data is available.
    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        self.waitset.wait(timeout)
    }

    /// Samples lost in transport and samples rejected for lack of room, since the reader was created.
    pub fn lost_and_rejected(&self) -> Result<(u64, u64)> {
        reader_lost_and_rejected(&self.entity)
    }

    /// Number of writers currently matched.
    pub fn matched_writers(&self) -> Result<u32> {
        // SAFETY: the status is plain integers, for which all-zero bytes are a valid value.
        let mut st: dds_subscription_matched_status_t = unsafe { std::mem::zeroed() };
        // SAFETY: handle-only call with one out-parameter, a valid local of the type Cyclone fills in.
        let r = unsafe { dds_get_subscription_matched_status(self.entity.handle, &mut st) };
        check(r, "dds_get_subscription_matched_status", || self.entity.what.clone())?;
        Ok(st.current_count)
    }
}

/// A typed reader: takes samples and decodes them as `T`.
pub struct Reader<T> {
    raw: RawReader,
    _t: PhantomData<fn() -> T>,
}

impl<T: TopicType> Reader<T> {
    /// Creates a reader. It accepts XCDR1 samples only (what [`crate::cdr`] decodes), which it states in its QoS
    /// unless `qos` sets a data representation itself.
    pub fn new(topic: &Topic<T>, qos: &Qos) -> Result<Self> {
        let mut q = qos.clone();
        if q.data_representation.is_none() {
            q.data_representation = Some(vec![crate::qos::DataRepresentation::Xcdr1]);
        }
        Ok(Reader { raw: RawReader::new(topic, &q)?, _t: PhantomData })
    }

    /// Takes every available sample (non-blocking).
    pub fn take(&self) -> Result<Vec<Sample<T>>> {
        let mut out = Vec::new();
        loop {
            let mut err = None;
            let n = self.raw.take_batch(|bytes, info| {
                if !info.valid_data {
                    out.push(Sample { value: None, info });
                    return;
                }
                match crate::cdr::from_slice::<T>(bytes) {
                    Ok(v) => out.push(Sample { value: Some(v), info }),
                    Err(e) => err = Some(e),
                }
            })?;
            if let Some(e) = err {
                return Err(e.into());
            }
            if n < TAKE_BATCH {
                return Ok(out);
            }
        }
    }

    /// Waits up to `timeout` for data, then takes everything available (possibly nothing).
    pub fn take_wait(&self, timeout: Duration) -> Result<Vec<Sample<T>>> {
        let got = self.take()?;
        if !got.is_empty() {
            return Ok(got);
        }
        self.raw.wait(timeout)?;
        self.take()
    }

    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        self.raw.wait(timeout)
    }

    pub fn raw(&self) -> &RawReader {
        &self.raw
    }

    pub fn matched_writers(&self) -> Result<u32> {
        self.raw.matched_writers()
    }
}
