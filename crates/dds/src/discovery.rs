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

    fn type_info_ptr(&self) -> Option<*const dds_typeinfo_t> {
        let q = self.raw_qos.as_ref()?;
        let mut ep: dds_builtintopic_endpoint_t = unsafe { std::mem::zeroed() };
        ep.qos = q.0;
        let mut ti: *const dds_typeinfo_t = std::ptr::null();
        // SAFETY: the call only reads ep.qos (alive in raw_qos) and returns a pointer into it.
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

// SAFETY: plain handles; Cyclone's API is thread-safe.
unsafe impl Send for EndpointWatcher {}
unsafe impl Sync for EndpointWatcher {}

const BATCH: usize = 32;

/// Takes every sample of a built-in topic reader on loan, handing each (as `&S`, the built-in sample type) with
/// its info to `f`, and returns the loans.
///
/// # Safety
/// `S` must be the sample type of the built-in topic `reader` reads.
unsafe fn take_loaned<S>(reader: &Entity, mut f: impl FnMut(&S, &dds_sample_info_t)) -> Result<()> {
    loop {
        let mut buf: [*mut std::ffi::c_void; BATCH] = [std::ptr::null_mut(); BATCH];
        let mut si: [dds_sample_info_t; BATCH] = std::mem::zeroed();
        // Null buffer entries ask Cyclone to loan its samples; the loan is returned below.
        let n = dds_take(reader.handle, buf.as_mut_ptr(), si.as_mut_ptr(), BATCH, BATCH as u32);
        let n = check(n, "dds_take", || reader.what.clone())? as usize;
        for i in 0..n {
            f(&*(buf[i] as *const S), &si[i]);
        }
        if n > 0 {
            check(dds_return_loan(reader.handle, buf.as_mut_ptr(), n as i32), "dds_return_loan", || reader.what.clone())?;
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
        // SAFETY: creating a reader on a built-in pseudo topic of a live participant.
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

    /// Takes every endpoint that appeared or went away since the last call.
    pub fn take(&self) -> Result<Vec<DiscoveredEndpoint>> {
        let mut out = Vec::new();
        // SAFETY: this reader reads DCPSPublication or DCPSSubscription, whose samples are
        // dds_builtintopic_endpoint_t; strings and QoS are valid during the loan and copied out here.
        unsafe {
            take_loaned(&self.reader, |ep: &dds_builtintopic_endpoint_t, si| {
                let alive = si.valid_data && si.instance_state == dds_instance_state_DDS_IST_ALIVE;
                let s = |p: *mut std::os::raw::c_char| {
                    if p.is_null() { String::new() } else { CStr::from_ptr(p).to_string_lossy().into_owned() }
                };
                let (qos, raw_qos) = if si.valid_data && !ep.qos.is_null() {
                    (Qos::from_raw(ep.qos), Some(Arc::new(OwnedQos::copy_of(ep.qos))))
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
            })?;
        }
        Ok(out)
    }
}

impl Participant {
    /// This participant's GUID.
    pub fn guid(&self) -> Result<Guid> {
        let mut g: dds_guid_t = unsafe { std::mem::zeroed() };
        // SAFETY: g is a valid out-parameter.
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

// SAFETY: the descriptor is immutable after creation and exclusively owned.
unsafe impl Send for TopicDescriptor {}
unsafe impl Sync for TopicDescriptor {}

impl Drop for TopicDescriptor {
    fn drop(&mut self) {
        // SAFETY: created by dds_create_topic_descriptor, deleted once.
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
        // SAFETY: ti points into ep's QoS copy, alive for the call; Cyclone allocates the descriptor.
        let r = unsafe { dds_create_topic_descriptor(dds_find_scope_DDS_FIND_SCOPE_GLOBAL, participant.handle(), ti, t, &mut ptr) };
        check(r, "dds_create_topic_descriptor", || format!("type {} of topic {}", ep.type_name, ep.topic_name))?;
        Ok(TopicDescriptor { ptr, type_name: ep.type_name.clone() })
    }

    /// Number of key fields of the type (0 for a keyless type).
    pub fn key_count(&self) -> u32 {
        // SAFETY: ptr is a valid descriptor for our lifetime.
        unsafe { (*self.ptr).m_nkeys }
    }
}

impl RawTopic {
    /// Creates topic `name` on `participant` with a resolved type. Keys of the type are honoured: instances stay
    /// instances when samples pass through raw readers and writers.
    pub fn with_descriptor(participant: &Participant, name: &str, desc: &TopicDescriptor, qos: &Qos) -> Result<Self> {
        let cname = cstring("topic name", name)?;
        let raw_qos = qos.to_raw()?;
        // SAFETY: desc is valid for our borrow; Cyclone copies what it keeps.
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

// SAFETY: plain handles; Cyclone's API is thread-safe.
unsafe impl Send for ParticipantWatcher {}
unsafe impl Sync for ParticipantWatcher {}

impl ParticipantWatcher {
    /// Watches participants; `properties` names the propagated properties to read from each.
    pub fn new(participant: &Participant, properties: &[&str]) -> Result<Self> {
        let what = "built-in participant reader".to_string();
        // SAFETY: creating a reader on a built-in pseudo topic of a live participant.
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
        // SAFETY: this reader reads DCPSParticipant, whose samples are dds_builtintopic_participant_t, valid
        // during the loan; everything needed is copied out.
        unsafe {
            take_loaned(&self.reader, |p: &dds_builtintopic_participant_t, si| {
                let valid = si.valid_data && !p.qos.is_null();
                let mut user_data = None;
                let mut properties = Vec::new();
                if valid {
                    let mut ud: *mut std::ffi::c_void = std::ptr::null_mut();
                    let mut sz = 0usize;
                    if dds_qget_userdata(p.qos, &mut ud, &mut sz) && !ud.is_null() {
                        user_data = Some(std::slice::from_raw_parts(ud as *const u8, sz).to_vec());
                        dds_free(ud);
                    }
                    for name in &self.properties {
                        let mut v: *mut std::os::raw::c_char = std::ptr::null_mut();
                        if dds_qget_prop(p.qos, name.as_ptr(), &mut v) && !v.is_null() {
                            properties.push((name.to_string_lossy().into_owned(), CStr::from_ptr(v).to_string_lossy().into_owned()));
                            dds_free(v as *mut _);
                        }
                    }
                }
                out.push(DiscoveredParticipant {
                    key: Guid::from_bytes(p.key.v),
                    user_data,
                    properties,
                    alive: si.valid_data && si.instance_state == dds_instance_state_DDS_IST_ALIVE,
                });
            })?;
        }
        Ok(out)
    }
}
