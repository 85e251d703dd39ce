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
    /// Whether unregistering an instance (or the writer's end) also disposes it (`dds_qset_writer_data_lifecycle`;
    /// DDS's default, and Cyclone's, is true). A writer that forwards another's life cycle sets false, so an
    /// unregister reaches its readers as an unregister.
    pub autodispose_unregistered: Option<bool>,
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
    pub fn autodispose_unregistered(mut self, autodispose: bool) -> Self {
        self.autodispose_unregistered = Some(autodispose);
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
    /// A new, empty QoS object.
    fn new() -> Self {
        // SAFETY: dds_create_qos takes nothing and returns a new, empty QoS object that the caller owns (it
        // never returns null: ddsrt_malloc aborts when memory runs out); RawQos deletes it, once.
        RawQos(unsafe { cyclors::dds_create_qos() })
    }

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

/// A length Cyclone stores as a `uint32_t`, refused rather than truncated when it does not fit.
fn count_u32(what: &str, n: usize) -> crate::Result<u32> {
    u32::try_from(n).map_err(|_| crate::DdsError::Config(format!("{n} {what} do not fit in a QoS")))
}

impl Qos {
    /// The policies set here as a Cyclone QoS object.
    ///
    /// About every setter called below (dds_public_qos.h, dds_qos.c): `p` is the QoS object `q` owns, alive and
    /// used by no one else until `to_raw` returns it; a setter writes its policy into `p` and reads only its
    /// other arguments, copying any buffer or string it is given before it returns.
    pub(crate) fn to_raw(&self) -> crate::Result<RawQos> {
        use cyclors::*;
        let q = RawQos::new();
        let p = q.0;
        if let Some(r) = self.reliability {
            let (kind, max_blocking) = match r {
                Reliability::BestEffort => (dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT, 0),
                Reliability::Reliable { max_blocking } => {
                    (dds_reliability_kind_DDS_RELIABILITY_RELIABLE, nanos(max_blocking))
                }
            };
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_reliability(p, kind, max_blocking) };
        }
        if let Some(h) = self.history {
            let (kind, depth) = match h {
                History::KeepLast(n) => (dds_history_kind_DDS_HISTORY_KEEP_LAST, n.max(1) as i32),
                History::KeepAll => (dds_history_kind_DDS_HISTORY_KEEP_ALL, -1),
            };
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_history(p, kind, depth) };
        }
        if let Some(d) = self.durability {
            let k = match d {
                Durability::Volatile => dds_durability_kind_DDS_DURABILITY_VOLATILE,
                Durability::TransientLocal => dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL,
            };
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_durability(p, k) };
        }
        if let Some(d) = self.deadline {
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_deadline(p, nanos(d)) };
        }
        if let Some(d) = self.latency_budget {
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_latency_budget(p, nanos(d)) };
        }
        if let Some(d) = self.lifespan {
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_lifespan(p, nanos(d)) };
        }
        if let Some(t) = self.transport_priority {
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_transport_priority(p, t) };
        }
        if let Some(o) = self.ownership {
            match o {
                // SAFETY: a setter of plain values on p (see above).
                Ownership::Shared => unsafe { dds_qset_ownership(p, dds_ownership_kind_DDS_OWNERSHIP_SHARED) },
                // SAFETY: two setters of plain values on p (see above), for the two halves of one policy.
                Ownership::Exclusive { strength } => unsafe {
                    dds_qset_ownership(p, dds_ownership_kind_DDS_OWNERSHIP_EXCLUSIVE);
                    dds_qset_ownership_strength(p, strength);
                },
            }
        }
        if let Some(parts) = &self.partitions {
            let owned: Vec<std::ffi::CString> =
                parts.iter().map(|s| crate::error::cstring("partition name", s)).collect::<crate::Result<_>>()?;
            let mut ptrs: Vec<*const std::os::raw::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
            let n = count_u32("partitions", ptrs.len())?;
            // SAFETY: p as above; ptrs holds exactly n pointers to NUL-terminated strings alive in `owned` for the
            // call. The binding's `*mut` is C's `const char **`: dds_qset_partition only reads the array and
            // duplicates each string (ddsrt_strdup).
            unsafe { dds_qset_partition(p, n, ptrs.as_mut_ptr()) };
        }
        if let Some(r) = self.resource_limits {
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_resource_limits(p, r.max_samples, r.max_instances, r.max_samples_per_instance) };
        }
        if let Some(reps) = &self.data_representation {
            let v: Vec<i16> = reps
                .iter()
                .map(|r| match r {
                    DataRepresentation::Xcdr1 => DDS_DATA_REPRESENTATION_XCDR1 as i16,
                    DataRepresentation::Xcdr2 => DDS_DATA_REPRESENTATION_XCDR2 as i16,
                })
                .collect();
            let n = count_u32("data representations", v.len())?;
            // SAFETY: p as above; v holds exactly n values, alive for the call, which Cyclone copies.
            unsafe { dds_qset_data_representation(p, n, v.as_ptr()) };
        }
        if let Some(u) = &self.user_data {
            // Cyclone copies all the bytes but keeps their count as a uint32_t, which must stay below UINT32_MAX
            // (dds_qos.c): refuse what would be truncated into a count that disagrees with the bytes.
            if count_u32("bytes of user data", u.len())? == u32::MAX {
                return Err(crate::DdsError::Config(format!("{} bytes of user data do not fit in a QoS", u.len())));
            }
            // SAFETY: p as above; u.as_ptr() points at u.len() bytes alive for the call, which Cyclone copies
            // (ddsrt_memdup, which touches nothing when the length is 0).
            unsafe { dds_qset_userdata(p, u.as_ptr() as *const _, u.len()) };
        }
        for (n, v) in &self.properties {
            let (n, v) = (crate::error::cstring("property name", n)?, crate::error::cstring("property value", v)?);
            // SAFETY: p as above; n and v are NUL-terminated strings alive for the call, which Cyclone copies
            // (dds_string_dup).
            unsafe { dds_qset_prop_propagate(p, n.as_ptr(), v.as_ptr(), true) };
        }
        if let Some(i) = self.ignore_local {
            let k = match i {
                IgnoreLocal::None => dds_ignorelocal_kind_DDS_IGNORELOCAL_NONE,
                IgnoreLocal::Participant => dds_ignorelocal_kind_DDS_IGNORELOCAL_PARTICIPANT,
                IgnoreLocal::Process => dds_ignorelocal_kind_DDS_IGNORELOCAL_PROCESS,
            };
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_ignorelocal(p, k) };
        }
        if let Some(b) = self.writer_batching {
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_writer_batching(p, b) };
        }
        if let Some(b) = self.autodispose_unregistered {
            // SAFETY: a setter of plain values on p (see above).
            unsafe { dds_qset_writer_data_lifecycle(p, b) };
        }
        Ok(q)
    }
}

/// A copy of a `dds_qos_t` received from discovery; it also carries the endpoint's type information.
pub(crate) struct OwnedQos(pub(crate) *mut cyclors::dds_qos_t);

// SAFETY: the QoS object is plain heap memory that this value alone owns and frees (dds_delete_qos), bound to no
// thread, so it may be moved to and dropped on any thread.
unsafe impl Send for OwnedQos {}
// SAFETY: nothing writes the QoS object after copy_of made it; through `&OwnedQos` it is only read (the type
// information pointer into it, and Cyclone functions that take it as const), which is fine from many threads.
unsafe impl Sync for OwnedQos {}

impl Drop for OwnedQos {
    fn drop(&mut self) {
        // SAFETY: created by dds_create_qos in OwnedQos::copy_of, deleted once.
        unsafe { cyclors::dds_delete_qos(self.0) }
    }
}

impl OwnedQos {
    /// Copies `src`, every policy included (the type information too).
    ///
    /// # Safety
    /// `src` must point to a valid `dds_qos_t` for the duration of the call.
    pub(crate) unsafe fn copy_of(src: *const cyclors::dds_qos_t) -> Self {
        let q = RawQos::new();
        // SAFETY: q is a new, empty QoS object of our own and src a valid one (caller). dds_copy_qos
        // (ddsi_xqos_copy) reads src and fills q with copies of all its policies, sharing no memory with it.
        unsafe { cyclors::dds_copy_qos(q.0, src) };
        // The object passes from the RawQos to the OwnedQos, which deletes it instead.
        let q = std::mem::ManuallyDrop::new(q);
        OwnedQos(q.0)
    }
}

fn duration(ns: i64) -> Duration {
    Duration::from_nanos(ns.max(0) as u64)
}

impl Qos {
    /// Reads the policies partita knows from a Cyclone QoS object (e.g. a discovered endpoint's).
    ///
    /// About every getter called below (dds_public_qos.h, dds_qos.c): it reads `q`, which is valid (see Safety),
    /// and stores into its out-parameters, valid locals here, or returns false and stores nothing when `q` lacks
    /// the policy. The getters that return buffers allocate them with dds_alloc for the caller to free.
    ///
    /// # Safety
    /// `q` must point to a valid `dds_qos_t` for the duration of the call.
    pub(crate) unsafe fn from_raw(q: *const cyclors::dds_qos_t) -> Self {
        use cyclors::*;
        let mut out = Qos::new();
        let (mut k, mut d, mut n) = (0u32, 0i64, 0i32);
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_reliability(q, &mut k, &mut d) } {
            out.reliability = Some(if k == dds_reliability_kind_DDS_RELIABILITY_RELIABLE {
                Reliability::Reliable { max_blocking: duration(d) }
            } else {
                Reliability::BestEffort
            });
        }
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_history(q, &mut k, &mut n) } {
            out.history = Some(if k == dds_history_kind_DDS_HISTORY_KEEP_ALL {
                History::KeepAll
            } else {
                History::KeepLast(n.max(1) as u32)
            });
        }
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_durability(q, &mut k) } {
            out.durability = Some(if k == dds_durability_kind_DDS_DURABILITY_VOLATILE {
                Durability::Volatile
            } else {
                // TRANSIENT and PERSISTENT need a durability service, which partita does not run; the nearest
                // it can honour is TRANSIENT_LOCAL.
                Durability::TransientLocal
            });
        }
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_deadline(q, &mut d) } && d != i64::MAX {
            out.deadline = Some(duration(d));
        }
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_latency_budget(q, &mut d) } && d != 0 {
            out.latency_budget = Some(duration(d));
        }
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_lifespan(q, &mut d) } && d != i64::MAX {
            out.lifespan = Some(duration(d));
        }
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_transport_priority(q, &mut n) } && n != 0 {
            out.transport_priority = Some(n);
        }
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_ownership(q, &mut k) } {
            if k == dds_ownership_kind_DDS_OWNERSHIP_EXCLUSIVE {
                let mut s = 0;
                // SAFETY: a getter of plain values from q (see above).
                unsafe { dds_qget_ownership_strength(q, &mut s) };
                out.ownership = Some(Ownership::Exclusive { strength: s });
            } else {
                out.ownership = Some(Ownership::Shared);
            }
        }
        let mut np = 0u32;
        let mut ps: *mut *mut std::os::raw::c_char = std::ptr::null_mut();
        // SAFETY: a getter from q (see above). With partitions, ps becomes an array of np strings, the array and
        // each string allocated for us (dds_alloc, dds_string_dup); without, ps is null.
        if unsafe { dds_qget_partition(q, &mut np, &mut ps) } && np > 0 && !ps.is_null() {
            let mut names = Vec::new();
            for i in 0..np as usize {
                // SAFETY: i < np, the length of the array ps points at (above); each entry is a NUL-terminated
                // string we own, copied here and then freed once with dds_free, Cyclone's allocator.
                unsafe {
                    let p = *ps.add(i);
                    if !p.is_null() {
                        names.push(std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned());
                        dds_free(p as *mut _);
                    }
                }
            }
            // SAFETY: the array itself, ours (above), freed once after its strings.
            unsafe { dds_free(ps as *mut _) };
            out.partitions = Some(names);
        }
        let mut nr = 0u32;
        let mut reps: *mut i16 = std::ptr::null_mut();
        // SAFETY: a getter from q (see above): reps becomes null or an array of nr values allocated for us.
        if unsafe { dds_qget_data_representation(q, &mut nr, &mut reps) } && !reps.is_null() {
            // SAFETY: reps points at nr initialised values (above), copied here, then freed once with dds_free.
            let raw = unsafe {
                let raw = std::slice::from_raw_parts(reps, nr as usize).to_vec();
                dds_free(reps as *mut _);
                raw
            };
            let v: Vec<DataRepresentation> = raw
                .iter()
                .filter_map(|r| match *r as u32 {
                    DDS_DATA_REPRESENTATION_XCDR1 => Some(DataRepresentation::Xcdr1),
                    DDS_DATA_REPRESENTATION_XCDR2 => Some(DataRepresentation::Xcdr2),
                    _ => None,
                })
                .collect();
            if !v.is_empty() {
                out.data_representation = Some(v);
            }
        }
        let mut ud: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut udn = 0usize;
        // SAFETY: a getter from q (see above): ud becomes null (no bytes) or a buffer of udn + 1 bytes allocated
        // for us.
        if unsafe { dds_qget_userdata(q, &mut ud, &mut udn) } && !ud.is_null() {
            // SAFETY: ud points at udn initialised bytes (above), copied here, then freed once with dds_free.
            unsafe {
                if udn > 0 {
                    out.user_data = Some(std::slice::from_raw_parts(ud as *const u8, udn).to_vec());
                }
                dds_free(ud);
            }
        }
        let (mut a, mut b, mut c) = (0i32, 0i32, 0i32);
        // SAFETY: a getter of plain values from q (see above).
        if unsafe { dds_qget_resource_limits(q, &mut a, &mut b, &mut c) } && (a, b, c) != (-1, -1, -1) {
            out.resource_limits = Some(ResourceLimits { max_samples: a, max_instances: b, max_samples_per_instance: c });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_policy_from_raw() -> Qos {
        Qos::reliable()
            .keep_all()
            .transient_local()
            .deadline(Duration::from_millis(250))
            .latency_budget(Duration::from_micros(50))
            .lifespan(Duration::from_secs(3))
            .transport_priority(3)
            .ownership(Ownership::Exclusive { strength: 7 })
            .partitions(["north", "south"])
            .resource_limits(ResourceLimits { max_samples: 100, max_instances: 10, max_samples_per_instance: 10 })
            .data_representation(vec![DataRepresentation::Xcdr1, DataRepresentation::Xcdr2])
            .user_data(b"camera rack 4".to_vec())
    }

    #[test]
    fn every_policy_read_back_survives_a_trip_through_cyclone_and_a_copy() {
        let want = every_policy_from_raw();
        let raw = want.to_raw().unwrap();
        // SAFETY: raw is a valid QoS object, alive for the call.
        let back = unsafe { Qos::from_raw(raw.as_ptr()) };
        assert_eq!(back, want);
        // SAFETY: as above.
        let copy = unsafe { OwnedQos::copy_of(raw.as_ptr()) };
        drop(raw);
        // SAFETY: copy owns a valid QoS object, alive for the call (and independent of the dropped original).
        let again = unsafe { Qos::from_raw(copy.0) };
        assert_eq!(again, want);
    }

    #[test]
    fn an_empty_qos_reads_back_empty_and_local_policies_are_accepted() {
        let local = Qos::new().ignore_local(IgnoreLocal::Process).writer_batching(true).property("k", "v");
        let raw = local.user_data(Vec::new()).to_raw().unwrap();
        // SAFETY: raw is a valid QoS object, alive for the call.
        let back = unsafe { Qos::from_raw(raw.as_ptr()) };
        assert_eq!(back, Qos::new());
    }

    #[test]
    fn counts_cyclone_cannot_hold_are_refused() {
        assert_eq!(count_u32("partitions", 2).unwrap(), 2);
        assert!(count_u32("partitions", u32::MAX as usize + 1).is_err());
    }
}
