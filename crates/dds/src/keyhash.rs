//! Keyed topics without a type: a sertype whose instances are told apart by the RTPS key hash alone.
//!
//! A router forwards a keyed topic whose type nobody announced (Fast DDS 2.x announces no XTypes type
//! information) without knowing its key fields. Its endpoints must still be keyed, or a keyed endpoint of
//! another implementation refuses to match them. This sertype keeps each sample's serialized bytes as they
//! came and the 16-byte key hash the wire gave with them:
//!
//! - a data sample's key hash comes from its inline QoS when the writer sent one (a Cyclone writer does for
//!   readers of this sertype, which ask for key hashes; a Fast DDS 2.x writer only to readers that announce
//!   they expect inline QoS, which a Cyclone reader cannot): without it the sample belongs to an "unknown key"
//!   instance, and a reader of the type on the far side finds its instance from the bytes;
//! - a key-only sample (dispose, unregister) sent as a key hash only, as Fast DDS sends them, becomes a sample
//!   of that instance, and is sent on as its 16-byte key hash in the payload, which Fast DDS 2.x takes as the
//!   instance; a key-only sample that came with a serialized key keeps it;
//! - a received key-only sample is handed to Cyclone as a data sample marked key-only (a "write and dispose" or
//!   "write and unregister" of its instance), and a reader's take reports it as the key-only sample it is
//!   (`valid_data` false). Cyclone's reader drops an unregister of an instance it does not have, and a Fast DDS
//!   writer sends its data without key hashes to a Cyclone reader: every data sample of such a writer is in the
//!   "unknown key" instance, so every unregister it sent was dropped. A write creates the instance, so the
//!   unregister reaches the reader's taker; a dispose, which Cyclone already accepted, goes the same way.
//!
//! Everything Cyclone asks of a sertype beyond moving serialized samples (typed samples, loans, type objects)
//! is left out: only raw readers and writers (`dds_takecdr`, `dds_forwardcdr`) use it.
use cyclors::*;
use std::ffi::c_void;

/// A sample of the sertype: Cyclone's common part first (Cyclone hands out and takes back pointers to it).
#[repr(C)]
struct KeyHashed {
    c: ddsi_serdata,
    /// The instance's key hash; all zeros while unknown.
    key_hash: [u8; 16],
    key_hash_known: bool,
    /// A dispose or unregister received as a key only, given to Cyclone as a data sample (see the module's
    /// documentation): its kind says data, it is not.
    key_only: bool,
    /// The serialized form: what came, or for a key-only sample that came as a key hash only, the key hash.
    bytes: Vec<u8>,
}

/// The sertype itself: Cyclone's common part only, allocated here and freed by Cyclone through `free`.
#[repr(C)]
struct KeyHashType {
    c: ddsi_sertype,
}

/// `ddsi_rdata` of Cyclone 11.0.1 (ddsi_radmin.h), which the bindings leave opaque: a received fragment. Only
/// the fields up to the payload offset are read, and their offsets do not depend on NDEBUG (the one debug
/// field comes after them): rmsg 0, nextfrag 8, min 16, maxp1 20, submsg_zoff 24, payload_zoff 26.
#[repr(C)]
struct RData {
    rmsg: *const u8,
    nextfrag: *const RData,
    min: u32,
    maxp1: u32,
    submsg_zoff: u16,
    payload_zoff: u16,
}

/// `sizeof (struct ddsi_rmsg)` in Cyclone 11.0.1 on 64-bit Linux: a received message's bytes start right after
/// it (`DDSI_RMSG_PAYLOAD`). Measured with the C compiler against cyclors' headers; cyclors is pinned exactly.
const RMSG_SIZE: usize = 48;

/// The sertype's operations (a static Cyclone may point at; its one raw pointer, `arg`, is null).
struct Ops<T>(T);
// SAFETY: the tables are immutable after initialisation and hold only function pointers and a null `arg`.
unsafe impl<T> Sync for Ops<T> {}

static SERTYPE_OPS: Ops<ddsi_sertype_ops> = Ops(ddsi_sertype_ops {
    version: Some(ddsi_sertype_v0),
    arg: std::ptr::null_mut(),
    free: Some(sertype_free),
    zero_samples: Some(sertype_zero_samples),
    realloc_samples: Some(sertype_realloc_samples),
    free_samples: Some(sertype_free_samples),
    equal: Some(sertype_equal),
    hash: Some(sertype_hash),
    type_id: None,
    type_map: None,
    type_info: None,
    derive_sertype: None,
    get_serialized_size: None,
    serialize_into: None,
});

static SERDATA_OPS: Ops<ddsi_serdata_ops> = Ops(ddsi_serdata_ops {
    eqkey: Some(eqkey),
    get_size: Some(get_size),
    from_ser: Some(from_ser),
    from_ser_iov: Some(from_ser_iov),
    from_keyhash: Some(from_keyhash),
    from_sample: None,
    to_ser: Some(to_ser),
    to_ser_ref: Some(to_ser_ref),
    to_ser_unref: Some(to_ser_unref),
    to_sample: None,
    to_untyped: Some(to_untyped),
    untyped_to_sample: None,
    free: Some(serdata_free),
    print: None,
    get_keyhash: Some(get_keyhash),
    from_loaned_sample: None,
    from_psmx: None,
});

/// A new sertype named `type_name` (a keyed topic kind, asking writers for key hashes), for
/// `dds_create_topic_sertype`, which takes it over on success; on failure the caller frees it with [`free`].
pub(crate) fn new_sertype(type_name: &std::ffi::CStr) -> *mut ddsi_sertype {
    // SAFETY: ddsi_sertype is plain C data; all-zero is what ddsi_sertype_init_flags expects to fill in.
    let t = Box::into_raw(Box::new(KeyHashType { c: unsafe { std::mem::zeroed() } }));
    // SAFETY: t points at a live, writable KeyHashType whose first field is the ddsi_sertype; type_name is a
    // NUL-terminated string Cyclone copies; both operation tables are statics. Flag REQUEST_KEYHASH (2): the
    // readers of this sertype ask writers for key hashes; no TOPICKIND_NO_KEY: the topic is keyed.
    unsafe { ddsi_sertype_init_flags(t.cast(), type_name.as_ptr(), &SERTYPE_OPS.0, &SERDATA_OPS.0, 2) };
    t.cast()
}

/// Frees a sertype of [`new_sertype`] that Cyclone did not take.
///
/// # Safety
/// `t` must come from [`new_sertype`] and not have been handed to Cyclone successfully.
pub(crate) unsafe fn free(t: *mut ddsi_sertype) {
    // SAFETY: the caller's promise: t is ours alone, from new_sertype.
    unsafe { sertype_free(t) };
}

/// Whether `sd` is a sample of this sertype.
///
/// # Safety
/// `sd` must point at a live serdata.
pub(crate) unsafe fn is_ours(sd: *const ddsi_serdata) -> bool {
    // SAFETY: sd is live (caller); ops is its first field, set at its creation and never changed.
    std::ptr::eq(unsafe { (*sd).ops }, &SERDATA_OPS.0)
}

/// Whether `t` is a sertype of [`new_sertype`].
///
/// # Safety
/// `t` must point at a live sertype.
pub(crate) unsafe fn is_our_type(t: *const ddsi_sertype) -> bool {
    // SAFETY: t is live (caller); serdata_ops is set at its initialisation and never changed.
    std::ptr::eq(unsafe { (*t).serdata_ops }, &SERDATA_OPS.0)
}

/// The key hash of a sample of this sertype, when the wire gave one.
///
/// # Safety
/// `sd` must be a live serdata for which [`is_ours`] holds.
pub(crate) unsafe fn key_hash_of(sd: *const ddsi_serdata) -> Option<[u8; 16]> {
    // SAFETY: sd is a live KeyHashed (caller), which no one modifies after its creation.
    let k = unsafe { &*(sd as *const KeyHashed) };
    k.key_hash_known.then_some(k.key_hash)
}

/// Whether `sd`, a sample of this sertype, is a dispose or unregister received as a key only.
///
/// # Safety
/// `sd` must be a live serdata for which [`is_ours`] holds.
pub(crate) unsafe fn is_key_only(sd: *const ddsi_serdata) -> bool {
    // SAFETY: sd is a live KeyHashed (caller), which no one modifies after its creation.
    unsafe { (*(sd as *const KeyHashed)).key_only }
}

/// A new sample of sertype `t`: `bytes` serialized as they are to go out, of instance `key_hash` when known.
/// A key-only sample without bytes goes out as its key hash.
///
/// # Safety
/// `t` must be a live sertype for which [`is_our_type`] holds.
pub(crate) unsafe fn new_sample(t: *const ddsi_sertype, kind: ddsi_serdata_kind, bytes: &[u8], key_hash: Option<[u8; 16]>) -> *mut ddsi_serdata {
    // SAFETY: t is one of our live sertypes (caller).
    unsafe { make(t, kind, bytes.to_vec(), key_hash) }
}

/// # Safety
/// `t` must be a live sertype of ours, or null for an untyped key (to_untyped).
unsafe fn make(t: *const ddsi_sertype, kind: ddsi_serdata_kind, bytes: Vec<u8>, key_hash: Option<[u8; 16]>) -> *mut ddsi_serdata {
    // SAFETY: as the caller promises.
    unsafe { make_marked(t, kind, bytes, key_hash, false) }
}

/// A key-only sample that came from the wire (Cyclone calls `from_ser` with a key and `from_keyhash` for a
/// dispose or unregister only): a data sample for Cyclone, marked key-only (see the module's documentation).
///
/// # Safety
/// `t` must be a live sertype of ours.
unsafe fn received_key_only(t: *const ddsi_sertype, bytes: Vec<u8>, key_hash: Option<[u8; 16]>) -> *mut ddsi_serdata {
    let bytes = if bytes.is_empty() { key_hash.map(|k| k.to_vec()).unwrap_or_default() } else { bytes };
    // SAFETY: as the caller promises.
    unsafe { make_marked(t, ddsi_serdata_kind_SDK_DATA, bytes, key_hash, true) }
}

/// # Safety
/// As [`make`].
unsafe fn make_marked(t: *const ddsi_sertype, kind: ddsi_serdata_kind, mut bytes: Vec<u8>, key_hash: Option<[u8; 16]>, key_only: bool) -> *mut ddsi_serdata {
    if kind == ddsi_serdata_kind_SDK_KEY && bytes.is_empty() {
        if let Some(k) = key_hash {
            bytes = k.to_vec();
        }
    }
    let d = Box::into_raw(Box::new(KeyHashed {
        // SAFETY: ddsi_serdata is plain C data; ddsi_serdata_init fills in every field below.
        c: unsafe { std::mem::zeroed() },
        key_hash: key_hash.unwrap_or_default(),
        key_hash_known: key_hash.is_some(),
        key_only,
        bytes,
    }));
    // SAFETY: d points at a live KeyHashed whose first field is the ddsi_serdata; t is a live sertype of ours
    // (caller), whose serdata_ops are SERDATA_OPS: init sets the reference count to 1, the kind, the type and
    // the hash from the type's base hash.
    unsafe {
        ddsi_serdata_init(d.cast(), t, kind);
        (*d).c.hash ^= fnv1a(&(*d).key_hash);
    }
    d.cast()
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| (h ^ *b as u32).wrapping_mul(0x0100_0193))
}

unsafe extern "C" fn sertype_free(t: *mut ddsi_sertype) {
    // SAFETY: Cyclone calls free once, when the last reference to a sertype of ours goes; fini releases what
    // init allocated (the type name) and the box is the one new_sertype made.
    unsafe {
        ddsi_sertype_fini(t);
        drop(Box::from_raw(t as *mut KeyHashType));
    }
}

unsafe extern "C" fn sertype_zero_samples(_: *const ddsi_sertype, _: *mut c_void, _: usize) {}

// Typed samples never exist for this sertype (raw readers and writers only), so there is nothing to allocate,
// clear or free.
unsafe extern "C" fn sertype_realloc_samples(_: *mut *mut c_void, _: *const ddsi_sertype, _: *mut c_void, _: usize, _: usize) {}

unsafe extern "C" fn sertype_free_samples(_: *const ddsi_sertype, _: *mut *mut c_void, _: usize, _: dds_free_op_t) {}

// Cyclone compares the common fields (type name, operation tables, flags) before calling this; there are no
// others.
unsafe extern "C" fn sertype_equal(_: *const ddsi_sertype, _: *const ddsi_sertype) -> bool {
    true
}

unsafe extern "C" fn sertype_hash(_: *const ddsi_sertype) -> u32 {
    0x6b65_7968 // "keyh": Cyclone mixes in the type name itself
}

unsafe extern "C" fn eqkey(a: *const ddsi_serdata, b: *const ddsi_serdata) -> bool {
    // SAFETY: Cyclone compares two live samples of one sertype (or their untyped keys, made by to_untyped), all
    // KeyHashed.
    unsafe { (*(a as *const KeyHashed)).key_hash == (*(b as *const KeyHashed)).key_hash }
}

unsafe extern "C" fn get_size(d: *const ddsi_serdata) -> u32 {
    // SAFETY: d is a live KeyHashed (Cyclone calls this on samples of this sertype only).
    unsafe { (*(d as *const KeyHashed)).bytes.len() as u32 }
}

unsafe extern "C" fn from_ser(t: *const ddsi_sertype, kind: ddsi_serdata_kind, fragchain: *const ddsi_rdata, size: usize) -> *mut ddsi_serdata {
    let mut bytes = Vec::with_capacity(size);
    let mut off = 0u32;
    let mut frag = fragchain as *const RData;
    while !frag.is_null() {
        // SAFETY: Cyclone hands over a chain of received fragments, each alive for the call, whose fields are
        // laid out as RData says (see there); min..maxp1 is the part of the sample each holds, in order, and the
        // payload offset points into its message's bytes, which follow the message header (RMSG_SIZE).
        unsafe {
            let f = &*frag;
            if f.maxp1 > off {
                let payload = f.rmsg.add(RMSG_SIZE + f.payload_zoff as usize);
                let from = payload.add((off - f.min) as usize);
                bytes.extend_from_slice(std::slice::from_raw_parts(from, (f.maxp1 - off) as usize));
                off = f.maxp1;
            }
            frag = f.nextfrag;
        }
    }
    bytes.truncate(size);
    // SAFETY: the chain's first fragment is a live rdata; Cyclone's helper reads its key hash offset.
    let kh = unsafe { ddsi_serdata_keyhash_from_fragchain(fragchain) };
    // SAFETY: a non-null key hash points at 16 bytes of the received message, alive for the call.
    let key_hash = (!kh.is_null()).then(|| unsafe { (*kh).value });
    // SAFETY: t is a live sertype of ours (Cyclone calls this through its serdata_ops). Cyclone's receive path asks
    // for a key (SDK_KEY) only for a dispose or unregister that came with a serialized key.
    unsafe {
        if kind == ddsi_serdata_kind_SDK_KEY {
            received_key_only(t, bytes, key_hash)
        } else {
            make(t, kind, bytes, key_hash)
        }
    }
}

unsafe extern "C" fn from_ser_iov(t: *const ddsi_sertype, kind: ddsi_serdata_kind, niov: ddsrt_msg_iovlen_t, iov: *const ddsrt_iovec_t, size: usize) -> *mut ddsi_serdata {
    let mut bytes = Vec::with_capacity(size);
    for i in 0..niov {
        // SAFETY: Cyclone passes niov iovecs, each pointing at iov_len readable bytes, for the call.
        unsafe {
            let v = &*iov.add(i);
            bytes.extend_from_slice(std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len));
        }
    }
    bytes.truncate(size);
    // SAFETY: t is a live sertype of ours.
    unsafe { make(t, kind, bytes, None) }
}

unsafe extern "C" fn from_keyhash(t: *const ddsi_sertype, kh: *const ddsi_keyhash) -> *mut ddsi_serdata {
    // SAFETY: kh points at a key hash alive for the call; t is a live sertype of ours. Cyclone's receive path makes
    // a sample from a key hash alone only for a dispose or unregister that came without a payload (Fast DDS's).
    unsafe { received_key_only(t, Vec::new(), Some((*kh).value)) }
}

unsafe extern "C" fn to_ser(d: *const ddsi_serdata, off: usize, sz: usize, buf: *mut c_void) {
    // SAFETY: d is a live KeyHashed; Cyclone asks for sz bytes from off within its size and gives a buffer of
    // at least sz bytes.
    unsafe {
        let b = &(*(d as *const KeyHashed)).bytes;
        std::ptr::copy_nonoverlapping(b.as_ptr().add(off), buf as *mut u8, sz);
    }
}

unsafe extern "C" fn to_ser_ref(d: *const ddsi_serdata, off: usize, sz: usize, r: *mut ddsrt_iovec_t) -> *mut ddsi_serdata {
    // SAFETY: d is a live KeyHashed; the bytes stay put while the reference taken here keeps it alive (until
    // to_ser_unref), and no one modifies them.
    unsafe {
        let b = &(*(d as *const KeyHashed)).bytes;
        (*r).iov_base = b.as_ptr().add(off) as *mut c_void;
        (*r).iov_len = sz;
        // What Cyclone's inline ddsi_serdata_ref does (not in the bindings): one more reference, atomically.
        let refc = std::sync::atomic::AtomicU32::from_ptr(std::ptr::addr_of_mut!((*(d as *mut ddsi_serdata)).refc.v));
        refc.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        d as *mut ddsi_serdata
    }
}

unsafe extern "C" fn to_ser_unref(d: *mut ddsi_serdata, _: *const ddsrt_iovec_t) {
    // SAFETY: releases the reference to_ser_ref took.
    unsafe { ddsi_serdata_unref(d) };
}

unsafe extern "C" fn to_untyped(d: *const ddsi_serdata) -> *mut ddsi_serdata {
    // SAFETY: d is a live KeyHashed. The untyped key keeps the key hash and hash (what eqkey and the instance
    // table compare) and no type, as Cyclone expects of an untyped serdata.
    unsafe {
        let k = &*(d as *const KeyHashed);
        let u = make(k.c.type_, ddsi_serdata_kind_SDK_KEY, Vec::new(), k.key_hash_known.then_some(k.key_hash));
        (*u).hash = k.c.hash;
        (*u).type_ = std::ptr::null();
        u
    }
}

unsafe extern "C" fn serdata_free(d: *mut ddsi_serdata) {
    // SAFETY: Cyclone frees a sample once, when its last reference goes; the box is the one make() made.
    unsafe { drop(Box::from_raw(d as *mut KeyHashed)) };
}

unsafe extern "C" fn get_keyhash(d: *const ddsi_serdata, buf: *mut ddsi_keyhash, _force_md5: bool) {
    // SAFETY: d is a live KeyHashed and buf a writable key hash. Without the type the key hash is what came
    // (an MD5 form cannot be made without the key): zeros while unknown.
    unsafe { (*buf).value = (*(d as *const KeyHashed)).key_hash };
}
