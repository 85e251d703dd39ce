//! Discovery: the built-in publication and subscription topics, and topics built from discovered types.
//!
//! A routing service learns here which writers and readers exist on a domain, with their topic, type name, QoS
//! and XTypes type information, and creates matching topics without any compiled-in type: Cyclone resolves
//! the type from the remote participant (type lookup) and derives a full topic descriptor, keys included.
use crate::endpoint::{Entity, RawTopic, ReaderWaitset};
use crate::error::{check, cstring, DdsError, Result};
use crate::guid::{Guid, GuidPrefix};
use crate::participant::Participant;
use crate::qos::{OwnedQos, Qos};
use cyclors::*;
use std::ffi::CStr;
use std::sync::Arc;
use std::time::Duration;

/// Which built-in topic to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndpointKind {
    /// Writers (DCPSPublication).
    Publication,
    /// Readers (DCPSSubscription).
    Subscription,
}

/// A writer or reader seen through discovery (including the local process's own).
#[derive(Clone)]
pub struct DiscoveredEndpoint {
    pub kind: EndpointKind,
    pub key: Guid,
    pub participant_key: Guid,
    pub topic_name: String,
    pub type_name: String,
    pub qos: Qos,
    /// False when the endpoint has gone away (only `key` and `instance_handle` are meaningful then).
    pub alive: bool,
    /// The endpoint's instance handle in this participant's domain: for a writer, the `publication_handle` its
    /// samples carry in [`crate::SampleInfo`].
    pub instance_handle: u64,
    raw_qos: Option<Arc<OwnedQos>>,
}

impl std::fmt::Debug for DiscoveredEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveredEndpoint")
            .field("kind", &self.kind)
            .field("topic", &self.topic_name)
            .field("type", &self.type_name)
            .field("alive", &self.alive)
            .field("has_type_info", &self.has_type_info())
            .finish()
    }
}

impl DiscoveredEndpoint {
    /// Whether the endpoint announced XTypes type information (needed to build a keyed topic without its type).
    pub fn has_type_info(&self) -> bool {
        self.type_info_ptr().is_some()
    }

    /// The endpoint's participant.
    pub fn participant_prefix(&self) -> GuidPrefix {
        self.participant_key.prefix()
    }

    /// The endpoint's type information: a pointer into this endpoint's QoS copy, valid while `self` is, and not
    /// to be freed.
    fn type_info_ptr(&self) -> Option<*const dds_typeinfo_t> {
        let q = self.raw_qos.as_ref()?;
        let no_guid = dds_guid_t { v: [0; 16] };
        let mut ep = dds_builtintopic_endpoint_t {
            key: no_guid,
            participant_key: no_guid,
            participant_instance_handle: 0,
            topic_name: std::ptr::null_mut(),
            type_name: std::ptr::null_mut(),
            qos: q.0,
        };
        let mut ti: *const dds_typeinfo_t = std::ptr::null();
        // SAFETY: ep and ti are valid locals; ep.qos is the QoS copy owned by raw_qos, alive as long as self. In
        // Cyclone 11.0.1 the call (dds_matched.c) only reads ep.qos and sets ti to the type information inside
        // that QoS, or null; despite dds.h's "allocated by this function", nothing is allocated, so nothing is
        // freed here, and the pointer is valid as long as the QoS copy, which no one modifies.
        let r = unsafe { dds_builtintopic_get_endpoint_type_info(&mut ep, &mut ti) };
        (r == 0 && !ti.is_null()).then_some(ti)
    }
}

/// Watches one built-in endpoint topic of a participant.
pub struct EndpointWatcher {
    kind: EndpointKind,
    waitset: ReaderWaitset,
    reader: Entity,
}

const BATCH: usize = 32;

/// Takes every sample of a built-in topic reader on loan, handing each (as `&S`, the built-in sample type) with
/// its info to `f`, and returns the loans.
///
/// # Safety
/// `S` must be the sample type of the built-in topic `reader` reads (dds.h: `dds_builtintopic_participant_t`
/// for DCPSParticipant, `dds_builtintopic_endpoint_t` for DCPSPublication and DCPSSubscription). `f` sees each
/// sample only for the call: pointers inside it (strings, QoS) must not be used after `f` returns, and for an
/// invalid sample (`valid_data` false) only the key is meaningful.
unsafe fn take_loaned<S>(reader: &Entity, mut f: impl FnMut(&S, &dds_sample_info_t)) -> Result<()> {
    loop {
        let mut buf: [*mut std::ffi::c_void; BATCH] = [std::ptr::null_mut(); BATCH];
        // SAFETY: dds_sample_info_t is plain data (integers and bools), for which all-zero bytes are valid.
        let mut si: [dds_sample_info_t; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: buf and si have room for BATCH entries, the maximum asked for. buf[0] being null asks for loans
        // (dds.h, dds_take): Cyclone points buf[..n] at samples of the reader's type that it owns, valid and
        // unchanged until they are returned below, and fills si[..n].
        let n = unsafe { dds_take(reader.handle, buf.as_mut_ptr(), si.as_mut_ptr(), BATCH, BATCH as u32) };
        let n = check(n, "dds_take", || reader.what.clone())? as usize;
        for (&sample, info) in buf[..n].iter().zip(&si) {
            // SAFETY: sample is one of the loans just taken: non-null, aligned and initialised as an S (the
            // caller's promise about the reader's topic), and not returned before f, which cannot keep the
            // reference, is done with it. A panic in f would leak the loans, never free them early.
            f(unsafe { &*(sample as *const S) }, info);
        }
        if n > 0 {
            // SAFETY: buf[..n] are the loans of this take (and buf[n], if n < BATCH, is null, as dds_take leaves
            // it), handed back once to the reader they came from; nothing refers to them any more.
            let r = unsafe { dds_return_loan(reader.handle, buf.as_mut_ptr(), n as i32) };
            check(r, "dds_return_loan", || reader.what.clone())?;
        }
        if n < BATCH {
            return Ok(());
        }
    }
}

impl EndpointWatcher {
    pub fn new(participant: &Participant, kind: EndpointKind) -> Result<Self> {
        let topic = match kind {
            EndpointKind::Publication => DDS_BUILTIN_TOPIC_DCPSPUBLICATION,
            EndpointKind::Subscription => DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION,
        };
        let what = format!("built-in {kind:?} reader");
        // SAFETY: handle-only call (see the endpoint module): the built-in topic is one of Cyclone's pseudo topic
        // handles, and there is no QoS and no listener (both null, which dds_create_reader accepts).
        let h = unsafe { dds_create_reader(participant.handle(), topic, std::ptr::null(), std::ptr::null()) };
        check(h, "dds_create_reader", || what.clone())?;
        let reader = Entity { handle: h, what, _parent: participant.inner.clone() };
        let waitset = ReaderWaitset::new(participant.handle(), &reader)?;
        Ok(EndpointWatcher { kind, waitset, reader })
    }

    /// Waits up to `timeout` for news.
    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        self.waitset.wait(timeout)
    }

    /// From now on `wakeup` also ends [`EndpointWatcher::wait`].
    pub fn attach(&self, wakeup: &crate::Wakeup) -> Result<()> {
        self.waitset.attach(wakeup)
    }

    /// Takes every endpoint that appeared or went away since the last call.
    pub fn take(&self) -> Result<Vec<DiscoveredEndpoint>> {
        let mut out = Vec::new();
        let on_sample = |ep: &dds_builtintopic_endpoint_t, si: &dds_sample_info_t| {
            let alive = si.valid_data && si.instance_state == dds_instance_state_DDS_IST_ALIVE;
            // Strings and QoS are read only for valid samples: an invalid one carries just its key.
            let s = |p: *mut std::os::raw::c_char| {
                if p.is_null() {
                    String::new()
                } else {
                    // SAFETY: a non-null name of a valid loaned sample is a NUL-terminated string that Cyclone
                    // keeps unchanged until the loan is returned, after this call; it is copied out here.
                    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
                }
            };
            let (qos, raw_qos) = if si.valid_data && !ep.qos.is_null() {
                // SAFETY: ep.qos is the valid sample's QoS object, alive until the loan is returned, after this
                // call; both only read it, and copy_of copies it into an object of our own.
                unsafe { (Qos::from_raw(ep.qos), Some(Arc::new(OwnedQos::copy_of(ep.qos)))) }
            } else {
                (Qos::new(), None)
            };
            out.push(DiscoveredEndpoint {
                kind: self.kind,
                key: Guid::from_bytes(ep.key.v),
                participant_key: Guid::from_bytes(ep.participant_key.v),
                topic_name: if si.valid_data { s(ep.topic_name) } else { String::new() },
                type_name: if si.valid_data { s(ep.type_name) } else { String::new() },
                qos,
                alive,
                instance_handle: si.instance_handle,
                raw_qos,
            });
        };
        // SAFETY: this reader reads DCPSPublication or DCPSSubscription (see new), whose samples are
        // dds_builtintopic_endpoint_t (dds.h); on_sample keeps nothing of a sample past its call.
        unsafe { take_loaned(&self.reader, on_sample) }?;
        Ok(out)
    }
}

impl Participant {
    /// This participant's GUID.
    pub fn guid(&self) -> Result<Guid> {
        let mut g = dds_guid_t { v: [0; 16] };
        // SAFETY: handle-only call with one out-parameter, a valid local of the type Cyclone fills in.
        let r = unsafe { dds_get_guid(self.handle(), &mut g) };
        check(r, "dds_get_guid", || format!("{self:?}"))?;
        Ok(Guid::from_bytes(g.v))
    }
}

/// A topic descriptor Cyclone derived from a discovered type: the type's layout, keys included, usable to
/// create the topic on any participant of this process (for example on both sides of a route).
pub struct TopicDescriptor {
    ptr: *mut dds_topic_descriptor_t,
    pub type_name: String,
}

// SAFETY: `ptr` is the one pointer to a descriptor Cyclone allocated for us (dds_create_topic_descriptor) and that
// only this value frees; it is plain heap memory, bound to no thread, so it may be used and freed anywhere.
unsafe impl Send for TopicDescriptor {}
// SAFETY: through `&TopicDescriptor` the descriptor is only read (key_count, and dds_create_topic, which takes it
// as `const` and copies what it keeps); nothing writes it after creation, so shared use across threads is fine.
unsafe impl Sync for TopicDescriptor {}

impl Drop for TopicDescriptor {
    fn drop(&mut self) {
        // SAFETY: ptr came from a successful dds_create_topic_descriptor and is freed here, once, with the
        // function dds.h names for it; no topic refers to it (dds_create_topic copies the descriptor).
        unsafe {
            dds_delete_topic_descriptor(self.ptr);
        }
    }
}

impl TopicDescriptor {
    /// Resolves the type a discovered endpoint announced, through `participant` (which must be on the endpoint's
    /// domain; Cyclone asks the endpoint's owner for the full type if it does not know it yet), waiting up to
    /// `timeout`.
    pub fn resolve(participant: &Participant, ep: &DiscoveredEndpoint, timeout: Duration) -> Result<Self> {
        let ti = ep.type_info_ptr().ok_or_else(|| DdsError::Type {
            type_name: ep.type_name.clone(),
            reason: format!("the endpoint on topic {} announced no type information", ep.topic_name),
        })?;
        let mut ptr: *mut dds_topic_descriptor_t = std::ptr::null_mut();
        let t = i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX);
        // SAFETY: ti points into ep's QoS copy, which ep (borrowed for the whole call, also while Cyclone waits
        // for the type) keeps alive and unmodified; Cyclone only reads it. ptr is a valid out-parameter: on
        // success Cyclone stores there a descriptor it allocated for us (freed in Drop), on failure it frees
        // what it allocated and we do not keep ptr.
        let r = unsafe { dds_create_topic_descriptor(dds_find_scope_DDS_FIND_SCOPE_GLOBAL, participant.handle(), ti, t, &mut ptr) };
        check(r, "dds_create_topic_descriptor", || format!("type {} of topic {}", ep.type_name, ep.topic_name))?;
        if ptr.is_null() {
            // Not something Cyclone 11.0.1 does on success; key_count and Drop rely on a non-null pointer.
            let reason = "Cyclone returned no topic descriptor".to_string();
            return Err(DdsError::Type { type_name: ep.type_name.clone(), reason });
        }
        Ok(TopicDescriptor { ptr, type_name: ep.type_name.clone() })
    }

    /// Number of key fields of the type (0 for a keyless type).
    pub fn key_count(&self) -> u32 {
        // SAFETY: ptr is non-null (checked in resolve) and points at the descriptor we own until Drop; nothing
        // writes it, so reading a field is fine from any thread.
        unsafe { (*self.ptr).m_nkeys }
    }
}

impl RawTopic {
    /// Creates topic `name` on `participant` with a resolved type. Keys of the type are honoured: instances stay
    /// instances when samples pass through raw readers and writers.
    pub fn with_descriptor(participant: &Participant, name: &str, desc: &TopicDescriptor, qos: &Qos) -> Result<Self> {
        let cname = cstring("topic name", name)?;
        let raw_qos = qos.to_raw()?;
        // SAFETY: desc.ptr is a valid descriptor, alive for the call (desc is borrowed); cname and raw_qos are
        // alive for the call too. dds_create_topic takes the descriptor as const and copies what it keeps of it
        // (dds_sertype_default_init), so the topic does not depend on desc afterwards. No listener (null).
        let handle = unsafe { dds_create_topic(participant.handle(), desc.ptr, cname.as_ptr(), raw_qos.as_ptr(), std::ptr::null()) };
        check(handle, "dds_create_topic", || format!("topic {name} ({})", desc.type_name))?;
        Ok(RawTopic::from_parts(participant, handle, name, &desc.type_name, desc.key_count() > 0))
    }
}

/// A participant seen through discovery (DCPSParticipant).
#[derive(Debug, Clone)]
pub struct DiscoveredParticipant {
    pub key: Guid,
    pub user_data: Option<Vec<u8>>,
    /// Propagated properties (only those asked for in [`ParticipantWatcher::new`]).
    pub properties: Vec<(String, String)>,
    /// False when the participant has gone away (only `key` is meaningful then).
    pub alive: bool,
}

/// Watches the built-in participant topic of a participant's domain.
pub struct ParticipantWatcher {
    waitset: ReaderWaitset,
    reader: Entity,
    properties: Vec<std::ffi::CString>,
}

impl ParticipantWatcher {
    /// Watches participants; `properties` names the propagated properties to read from each.
    pub fn new(participant: &Participant, properties: &[&str]) -> Result<Self> {
        let what = "built-in participant reader".to_string();
        // SAFETY: handle-only call (see the endpoint module): the built-in topic is one of Cyclone's pseudo topic
        // handles, and there is no QoS and no listener (both null, which dds_create_reader accepts).
        let h = unsafe { dds_create_reader(participant.handle(), DDS_BUILTIN_TOPIC_DCPSPARTICIPANT, std::ptr::null(), std::ptr::null()) };
        check(h, "dds_create_reader", || what.clone())?;
        let reader = Entity { handle: h, what, _parent: participant.inner.clone() };
        let waitset = ReaderWaitset::new(participant.handle(), &reader)?;
        let properties = properties.iter().map(|p| cstring("property name", p)).collect::<Result<_>>()?;
        Ok(ParticipantWatcher { waitset, reader, properties })
    }

    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        self.waitset.wait(timeout)
    }

    /// Takes every participant that appeared or went away since the last call.
    pub fn take(&self) -> Result<Vec<DiscoveredParticipant>> {
        let mut out = Vec::new();
        let on_sample = |p: &dds_builtintopic_participant_t, si: &dds_sample_info_t| {
            // The QoS is read only for valid samples: an invalid one carries just its key.
            let valid = si.valid_data && !p.qos.is_null();
            let mut user_data = None;
            let mut properties = Vec::new();
            if valid {
                let mut ud: *mut std::ffi::c_void = std::ptr::null_mut();
                let mut sz = 0usize;
                // SAFETY: p.qos is the valid sample's QoS object, alive until the loan is returned, after this
                // call; ud and sz are valid out-parameters. Cyclone copies the user data out: null if empty, else
                // a buffer of sz + 1 bytes that the caller owns (dds_public_qos.h, dds_qget_userdata).
                if unsafe { dds_qget_userdata(p.qos, &mut ud, &mut sz) } && !ud.is_null() {
                    // SAFETY: ud points at sz initialised bytes (above), copied here, then freed once with
                    // dds_free, the allocator Cyclone used (dds_alloc).
                    unsafe {
                        user_data = Some(std::slice::from_raw_parts(ud as *const u8, sz).to_vec());
                        dds_free(ud);
                    }
                }
                for name in &self.properties {
                    let mut v: *mut std::os::raw::c_char = std::ptr::null_mut();
                    // SAFETY: p.qos as above; name is a NUL-terminated string we own; v is a valid out-parameter.
                    // When found, Cyclone stores a copy of the value that the caller owns (dds_qget_prop).
                    if unsafe { dds_qget_prop(p.qos, name.as_ptr(), &mut v) } && !v.is_null() {
                        // SAFETY: v is a NUL-terminated string of our own (above), copied here, then freed once
                        // with dds_free, the allocator Cyclone used (dds_string_dup).
                        let value = unsafe {
                            let value = CStr::from_ptr(v).to_string_lossy().into_owned();
                            dds_free(v as *mut _);
                            value
                        };
                        properties.push((name.to_string_lossy().into_owned(), value));
                    }
                }
            }
            out.push(DiscoveredParticipant {
                key: Guid::from_bytes(p.key.v),
                user_data,
                properties,
                alive: si.valid_data && si.instance_state == dds_instance_state_DDS_IST_ALIVE,
            });
        };
        // SAFETY: this reader reads DCPSParticipant (see new), whose samples are dds_builtintopic_participant_t
        // (dds.h); on_sample keeps nothing of a sample past its call.
        unsafe { take_loaned(&self.reader, on_sample) }?;
        Ok(out)
    }
}
