//! Domains and participants.
//!
//! A Cyclone domain is process-wide: its configuration is fixed by the first `dds_create_domain` for that id.
//! partita creates every domain itself, from an explicit [`DomainConfig`], so no participant ever runs on
//! Cyclone's defaults (or on a stray `CYCLONEDDS_URI`). A second participant on the same domain id reuses the
//! domain when the configuration is identical and is refused otherwise.
use crate::config::DomainConfig;
use crate::error::{check, cstring, DdsError, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

pub(crate) struct Domain {
    handle: cyclors::dds_entity_t,
}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: the handle is a domain we created; deleting it also deletes anything left in it.
        unsafe {
            cyclors::dds_delete(self.handle);
        }
    }
}

/// The domains this process created: id → (the live domain, the configuration it was created with).
type DomainRegistry = HashMap<u32, (Weak<Domain>, String)>;

static DOMAINS: Mutex<Option<DomainRegistry>> = Mutex::new(None);

fn domain(config: &DomainConfig) -> Result<Arc<Domain>> {
    let xml = config.to_cyclone_config()?;
    let mut guard = DOMAINS.lock().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some((weak, existing)) = map.get(&config.domain_id) {
        if let Some(d) = weak.upgrade() {
            if *existing == xml {
                return Ok(d);
            }
            return Err(DdsError::Config(format!(
                "domain {} already exists in this process with another configuration; use one configuration per domain id",
                config.domain_id
            )));
        }
    }
    let c = cstring("domain configuration", &xml)?;
    // SAFETY: the configuration string is valid for the call; Cyclone parses and copies it.
    let handle = unsafe { cyclors::dds_create_domain(config.domain_id, c.as_ptr()) };
    check(handle, "dds_create_domain", || format!("domain {} with configuration {xml}", config.domain_id))?;
    let d = Arc::new(Domain { handle });
    map.insert(config.domain_id, (Arc::downgrade(&d), xml));
    Ok(d)
}

pub(crate) struct ParticipantInner {
    pub(crate) handle: cyclors::dds_entity_t,
    pub(crate) domain_id: u32,
    _domain: Arc<Domain>,
}

impl Drop for ParticipantInner {
    fn drop(&mut self) {
        // SAFETY: we own this participant; its children (topics, readers, writers) hold an Arc to us, so they
        // are gone (or deleted with it) by now.
        unsafe {
            cyclors::dds_delete(self.handle);
        }
    }
}

/// A DDS domain participant. Cheap to clone; deleted when the last clone and every entity made from it are gone.
#[derive(Clone)]
pub struct Participant {
    pub(crate) inner: Arc<ParticipantInner>,
}

impl Participant {
    /// Creates a participant on the domain described by `config` (created on first use in this process).
    pub fn new(config: &DomainConfig) -> Result<Self> {
        Self::with_qos(config, &crate::Qos::new())
    }

    /// Like [`Participant::new`], announcing the given participant QoS (USER_DATA, properties).
    pub fn with_qos(config: &DomainConfig, qos: &crate::Qos) -> Result<Self> {
        let d = domain(config)?;
        let raw = qos.to_raw()?;
        // SAFETY: plain entity creation; Cyclone copies the QoS; no listener.
        let handle = unsafe { cyclors::dds_create_participant(config.domain_id, raw.as_ptr(), std::ptr::null()) };
        check(handle, "dds_create_participant", || format!("domain {}", config.domain_id))?;
        Ok(Participant { inner: Arc::new(ParticipantInner { handle, domain_id: config.domain_id, _domain: d }) })
    }

    pub fn domain_id(&self) -> u32 {
        self.inner.domain_id
    }

    pub(crate) fn handle(&self) -> cyclors::dds_entity_t {
        self.inner.handle
    }
}

impl std::fmt::Debug for Participant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Participant(domain {}, handle {})", self.inner.domain_id, self.inner.handle)
    }
}
