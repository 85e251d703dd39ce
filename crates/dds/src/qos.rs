//! QoS as plain builder-style values, turned into a Cyclone `dds_qos_t` only when an entity is created.
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reliability {
    BestEffort,
    /// Reliable, with the maximum time a write may block when resources are full.
    Reliable { max_blocking: Duration },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    KeepLast(u32),
    KeepAll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Volatile,
    TransientLocal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    Shared,
    /// Exclusive, with this writer's strength.
    Exclusive { strength: i32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    pub max_samples: i32,
    pub max_instances: i32,
    pub max_samples_per_instance: i32,
}

/// Which encodings a reader accepts or a writer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRepresentation {
    Xcdr1,
    Xcdr2,
}

/// A set of QoS policies; `None` leaves Cyclone's default for that policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qos {
    pub reliability: Option<Reliability>,
    pub history: Option<History>,
    pub durability: Option<Durability>,
    pub deadline: Option<Duration>,
    pub latency_budget: Option<Duration>,
    pub lifespan: Option<Duration>,
    pub transport_priority: Option<i32>,
    pub ownership: Option<Ownership>,
    pub partitions: Option<Vec<String>>,
    pub resource_limits: Option<ResourceLimits>,
    pub data_representation: Option<Vec<DataRepresentation>>,
    /// Do not deliver samples of writers in the same participant / process (`dds_qset_ignorelocal`).
    pub ignore_local: Option<IgnoreLocal>,
    /// Opaque bytes announced with the entity in discovery (USER_DATA).
    pub user_data: Option<Vec<u8>>,
    /// Name/value properties announced in discovery (propagated PROPERTY entries).
    pub properties: Vec<(String, String)>,
    /// A writer's samples wait in its outgoing message until it is full or [`crate::RawWriter::flush`] sends
    /// it, so several samples travel in one datagram (`dds_qset_writer_batching`, Cyclone's own extension;
    /// local to the writer, never announced in discovery).
    pub writer_batching: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoreLocal {
    None,
    Participant,
    Process,
}

impl Qos {
    pub fn new() -> Self {
        Self::default()
    }
    /// Reliable with a 1 s maximum blocking time, keep-last 1: the common request/response setting.
    pub fn reliable() -> Self {
        Self::new().reliability(Reliability::Reliable { max_blocking: Duration::from_secs(1) })
    }
    pub fn best_effort() -> Self {
        Self::new().reliability(Reliability::BestEffort)
    }
    pub fn reliability(mut self, r: Reliability) -> Self {
        self.reliability = Some(r);
        self
    }
    pub fn history(mut self, h: History) -> Self {
        self.history = Some(h);
        self
    }
    pub fn keep_last(self, depth: u32) -> Self {
        self.history(History::KeepLast(depth))
    }
    pub fn keep_all(self) -> Self {
        self.history(History::KeepAll)
    }
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = Some(d);
        self
    }
    pub fn transient_local(self) -> Self {
        self.durability(Durability::TransientLocal)
    }
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = Some(d);
        self
    }
    pub fn latency_budget(mut self, d: Duration) -> Self {
        self.latency_budget = Some(d);
        self
    }
    pub fn lifespan(mut self, d: Duration) -> Self {
        self.lifespan = Some(d);
        self
    }
    pub fn transport_priority(mut self, p: i32) -> Self {
        self.transport_priority = Some(p);
        self
    }
    pub fn ownership(mut self, o: Ownership) -> Self {
        self.ownership = Some(o);
        self
    }
    pub fn partitions<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.partitions = Some(names.into_iter().map(Into::into).collect());
        self
    }
    pub fn resource_limits(mut self, r: ResourceLimits) -> Self {
        self.resource_limits = Some(r);
        self
    }
    pub fn data_representation(mut self, r: Vec<DataRepresentation>) -> Self {
        self.data_representation = Some(r);
        self
    }
    pub fn ignore_local(mut self, i: IgnoreLocal) -> Self {
        self.ignore_local = Some(i);
        self
    }
    pub fn user_data(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.user_data = Some(bytes.into());
        self
    }
    pub fn property(mut self, name: &str, value: &str) -> Self {
        self.properties.push((name.into(), value.into()));
        self
    }
    pub fn writer_batching(mut self, batch: bool) -> Self {
        self.writer_batching = Some(batch);
        self
    }
}

fn nanos(d: Duration) -> i64 {
    // Cyclone's "infinity" is i64::MAX; anything longer saturates to it.
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// An owned `dds_qos_t`, deleted on drop.
pub(crate) struct RawQos(*mut cyclors::dds_qos_t);

impl RawQos {
    pub(crate) fn as_ptr(&self) -> *const cyclors::dds_qos_t {
        self.0
    }
}

impl Drop for RawQos {
    fn drop(&mut self) {
        // SAFETY: self.0 came from dds_create_qos and is deleted exactly once, here.
        unsafe { cyclors::dds_delete_qos(self.0) }
    }
}

impl Qos {
    pub(crate) fn to_raw(&self) -> crate::Result<RawQos> {
        use cyclors::*;
        // SAFETY: dds_create_qos returns a fresh, owned QoS object; every setter below only reads its arguments
        // (strings are copied by Cyclone) and writes into that object.
        unsafe {
            let q = RawQos(dds_create_qos());
            let p = q.0;
            if let Some(r) = self.reliability {
                match r {
                    Reliability::BestEffort => dds_qset_reliability(p, dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT, 0),
                    Reliability::Reliable { max_blocking } => {
                        dds_qset_reliability(p, dds_reliability_kind_DDS_RELIABILITY_RELIABLE, nanos(max_blocking))
                    }
                }
            }
            if let Some(h) = self.history {
                match h {
                    History::KeepLast(n) => dds_qset_history(p, dds_history_kind_DDS_HISTORY_KEEP_LAST, n.max(1) as i32),
                    History::KeepAll => dds_qset_history(p, dds_history_kind_DDS_HISTORY_KEEP_ALL, -1),
                }
            }
            if let Some(d) = self.durability {
                let k = match d {
                    Durability::Volatile => dds_durability_kind_DDS_DURABILITY_VOLATILE,
                    Durability::TransientLocal => dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL,
                };
                dds_qset_durability(p, k);
            }
            if let Some(d) = self.deadline {
                dds_qset_deadline(p, nanos(d));
            }
            if let Some(d) = self.latency_budget {
                dds_qset_latency_budget(p, nanos(d));
            }
            if let Some(d) = self.lifespan {
                dds_qset_lifespan(p, nanos(d));
            }
            if let Some(t) = self.transport_priority {
                dds_qset_transport_priority(p, t);
            }
            if let Some(o) = self.ownership {
                match o {
                    Ownership::Shared => dds_qset_ownership(p, dds_ownership_kind_DDS_OWNERSHIP_SHARED),
                    Ownership::Exclusive { strength } => {
                        dds_qset_ownership(p, dds_ownership_kind_DDS_OWNERSHIP_EXCLUSIVE);
                        dds_qset_ownership_strength(p, strength);
                    }
                }
            }
            if let Some(parts) = &self.partitions {
                let owned: Vec<std::ffi::CString> =
                    parts.iter().map(|s| crate::error::cstring("partition name", s)).collect::<crate::Result<_>>()?;
                let mut ptrs: Vec<*const std::os::raw::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
                dds_qset_partition(p, ptrs.len() as u32, ptrs.as_mut_ptr());
            }
            if let Some(r) = self.resource_limits {
                dds_qset_resource_limits(p, r.max_samples, r.max_instances, r.max_samples_per_instance);
            }
            if let Some(reps) = &self.data_representation {
                let v: Vec<i16> = reps
                    .iter()
                    .map(|r| match r {
                        DataRepresentation::Xcdr1 => DDS_DATA_REPRESENTATION_XCDR1 as i16,
                        DataRepresentation::Xcdr2 => DDS_DATA_REPRESENTATION_XCDR2 as i16,
                    })
                    .collect();
                dds_qset_data_representation(p, v.len() as u32, v.as_ptr());
            }
            if let Some(u) = &self.user_data {
                dds_qset_userdata(p, u.as_ptr() as *const _, u.len());
            }
            for (n, v) in &self.properties {
                let (n, v) = (crate::error::cstring("property name", n)?, crate::error::cstring("property value", v)?);
                dds_qset_prop_propagate(p, n.as_ptr(), v.as_ptr(), true);
            }
            if let Some(i) = self.ignore_local {
                let k = match i {
                    IgnoreLocal::None => dds_ignorelocal_kind_DDS_IGNORELOCAL_NONE,
                    IgnoreLocal::Participant => dds_ignorelocal_kind_DDS_IGNORELOCAL_PARTICIPANT,
                    IgnoreLocal::Process => dds_ignorelocal_kind_DDS_IGNORELOCAL_PROCESS,
                };
                dds_qset_ignorelocal(p, k);
            }
            if let Some(b) = self.writer_batching {
                dds_qset_writer_batching(p, b);
            }
            Ok(q)
        }
    }
}

/// A copy of a `dds_qos_t` received from discovery; it also carries the endpoint's type information.
pub(crate) struct OwnedQos(pub(crate) *mut cyclors::dds_qos_t);

// SAFETY: the QoS object is exclusively owned and only read after creation.
unsafe impl Send for OwnedQos {}
unsafe impl Sync for OwnedQos {}

impl Drop for OwnedQos {
    fn drop(&mut self) {
        // SAFETY: created by dds_create_qos in OwnedQos::copy_of, deleted once.
        unsafe { cyclors::dds_delete_qos(self.0) }
    }
}

impl OwnedQos {
    /// Copies `src`; `src` must be a valid QoS object for the duration of the call.
    pub(crate) unsafe fn copy_of(src: *const cyclors::dds_qos_t) -> Self {
        let q = cyclors::dds_create_qos();
        cyclors::dds_copy_qos(q, src);
        OwnedQos(q)
    }
}

fn duration(ns: i64) -> Duration {
    Duration::from_nanos(ns.max(0) as u64)
}

impl Qos {
    /// Reads the policies partita knows from a Cyclone QoS object (e.g. a discovered endpoint's).
    ///
    /// # Safety
    /// `q` must point to a valid `dds_qos_t` for the duration of the call.
    pub(crate) unsafe fn from_raw(q: *const cyclors::dds_qos_t) -> Self {
        use cyclors::*;
        let mut out = Qos::new();
        let (mut k, mut d, mut n) = (0u32, 0i64, 0i32);
        if dds_qget_reliability(q, &mut k, &mut d) {
            out.reliability = Some(if k == dds_reliability_kind_DDS_RELIABILITY_RELIABLE {
                Reliability::Reliable { max_blocking: duration(d) }
            } else {
                Reliability::BestEffort
            });
        }
        if dds_qget_history(q, &mut k, &mut n) {
            out.history = Some(if k == dds_history_kind_DDS_HISTORY_KEEP_ALL {
                History::KeepAll
            } else {
                History::KeepLast(n.max(1) as u32)
            });
        }
        if dds_qget_durability(q, &mut k) {
            out.durability = Some(if k == dds_durability_kind_DDS_DURABILITY_VOLATILE {
                Durability::Volatile
            } else {
                // TRANSIENT and PERSISTENT need a durability service, which partita does not run; the nearest
                // it can honour is TRANSIENT_LOCAL.
                Durability::TransientLocal
            });
        }
        if dds_qget_deadline(q, &mut d) && d != i64::MAX {
            out.deadline = Some(duration(d));
        }
        if dds_qget_latency_budget(q, &mut d) && d != 0 {
            out.latency_budget = Some(duration(d));
        }
        if dds_qget_lifespan(q, &mut d) && d != i64::MAX {
            out.lifespan = Some(duration(d));
        }
        if dds_qget_transport_priority(q, &mut n) && n != 0 {
            out.transport_priority = Some(n);
        }
        if dds_qget_ownership(q, &mut k) {
            if k == dds_ownership_kind_DDS_OWNERSHIP_EXCLUSIVE {
                let mut s = 0;
                dds_qget_ownership_strength(q, &mut s);
                out.ownership = Some(Ownership::Exclusive { strength: s });
            } else {
                out.ownership = Some(Ownership::Shared);
            }
        }
        let mut np = 0u32;
        let mut ps: *mut *mut std::os::raw::c_char = std::ptr::null_mut();
        if dds_qget_partition(q, &mut np, &mut ps) && np > 0 && !ps.is_null() {
            let mut names = Vec::new();
            for i in 0..np as usize {
                let p = *ps.add(i);
                names.push(std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned());
                dds_free(p as *mut _);
            }
            dds_free(ps as *mut _);
            out.partitions = Some(names);
        }
        let mut nr = 0u32;
        let mut reps: *mut i16 = std::ptr::null_mut();
        if dds_qget_data_representation(q, &mut nr, &mut reps) && !reps.is_null() {
            let v: Vec<DataRepresentation> = std::slice::from_raw_parts(reps, nr as usize)
                .iter()
                .filter_map(|r| match *r as u32 {
                    DDS_DATA_REPRESENTATION_XCDR1 => Some(DataRepresentation::Xcdr1),
                    DDS_DATA_REPRESENTATION_XCDR2 => Some(DataRepresentation::Xcdr2),
                    _ => None,
                })
                .collect();
            dds_free(reps as *mut _);
            if !v.is_empty() {
                out.data_representation = Some(v);
            }
        }
        let mut ud: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut udn = 0usize;
        if dds_qget_userdata(q, &mut ud, &mut udn) && !ud.is_null() {
            if udn > 0 {
                out.user_data = Some(std::slice::from_raw_parts(ud as *const u8, udn).to_vec());
            }
            dds_free(ud);
        }
        let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
        if dds_qget_resource_limits(q, &mut a, &mut b, &mut c) && (a, b, c) != (-1, -1, -1) {
            out.resource_limits = Some(ResourceLimits { max_samples: a, max_instances: b, max_samples_per_instance: c });
        }
        out
    }
}
