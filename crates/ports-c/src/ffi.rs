//! The functions C calls, as `include/partita_ports.h` declares and documents them: the crate's only unsafe
//! code. Each one checks C's pointers and lengths, turns them into Rust values, and calls the safe layer of the
//! crate root inside `guarded`, which turns failures and panics into codes.
//!
//! The contract C keeps (the header says it function by function): a handle is null or one an `_open`
//! function returned and no `_close` has taken, used by one thread at a time; a name is null or a
//! NUL-terminated string; a message pointer is null or holds `len` bytes; a buffer is null or holds `cap`
//! writable bytes; an out-pointer is null or writable. Everything this module can check (null, lengths against
//! the buffer given and the channel) it checks; the rest is C's promise, as it is for `memcpy`.
#![deny(unsafe_op_in_unsafe_fn)]

use crate::{guarded, guarded_open, last_error, open_ports, Code, Failure, QueuingDestinationHandle, QueuingSourceHandle, SamplingDestinationHandle, SamplingSourceHandle};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::catch_unwind;
use std::ptr;

/// Writes `value` to `out` when C gave somewhere to write it.
///
/// # Safety
/// `out` is null or valid for writing a `T`.
unsafe fn put<T>(out: *mut T, value: T) {
    // SAFETY: `out` is null (nothing written) or writable, by the caller's contract.
    if let Some(out) = unsafe { out.as_mut() } {
        *out = value;
    }
}

/// The handle behind `handle`, or `InvalidArgument` for a null one.
///
/// # Safety
/// `handle` is null or a pointer an `_open` function returned, not closed, used by no other thread meanwhile.
unsafe fn handle<'a, H>(handle: *mut H, what: &str) -> Result<&'a mut H, Failure> {
    // SAFETY: non-null handles come from `Box::into_raw` in `open` and are used by one thread at a time (the
    // header's contract), so this is the only reference to the box for the call.
    unsafe { handle.as_mut() }.ok_or_else(|| Failure::invalid_argument(&format!("the {what} handle is NULL")))
}

/// C's port name, or `InvalidArgument` for a null one.
///
/// # Safety
/// `name` is null or a NUL-terminated string that stays unchanged during the call.
unsafe fn port_name<'a>(name: *const c_char) -> Result<&'a CStr, Failure> {
    if name.is_null() {
        return Err(Failure::invalid_argument("the port name is NULL"));
    }
    // SAFETY: not null (checked); NUL-terminated and unchanged during the call, by the caller's contract.
    Ok(unsafe { CStr::from_ptr(name) })
}

/// Opens a port with `open`: the handle, or null with the code in `*err` (when `err` is not null).
///
/// # Safety
/// `name` as for [`port_name`]; `err` is null or writable.
unsafe fn open<H>(name: *const c_char, err: *mut c_int, open: fn(&CStr) -> Result<H, Failure>) -> *mut H {
    let mut code = Code::Ok as c_int;
    let made = guarded_open(&mut code, || {
        // SAFETY: `name` is null (refused) or a C string, by this function's contract.
        open(unsafe { port_name(name) }?)
    });
    // SAFETY: `err` is null or writable, by this function's contract.
    unsafe { put(err, code) };
    made.map_or(ptr::null_mut(), Box::into_raw)
}

/// Closes a handle `open` made; null is nothing to close.
///
/// # Safety
/// `handle` is null or a pointer `open` returned, closed once, not in use by another thread.
unsafe fn close<H>(handle: *mut H) {
    if handle.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `open` and closed only here, once, by the caller's contract.
    let port = unsafe { Box::from_raw(handle) };
    // Unmapping cannot fail in a way C could act on: the code is dropped, a panic is only caught.
    let _ = guarded(move || {
        drop(port);
        Ok(())
    });
}

/// `msg` checked for null: null is allowed for an empty message only.
fn message(msg: *const c_void, len: usize) -> Result<*const u8, Failure> {
    if msg.is_null() && len > 0 {
        return Err(Failure::invalid_argument(&format!("the message is NULL with a length of {len} bytes")));
    }
    Ok(msg.cast())
}

/// Copies C's message into the slot the port hands out, which the port has already checked `len` against the
/// channel's maximum for; never more than `len` bytes, whatever the slot's size.
///
/// # Safety
/// `msg` holds `len` readable bytes, and is not null unless `len` is 0 (see [`message`]).
unsafe fn copy_in(msg: *const u8, len: usize, slot: &mut [u8]) {
    let n = slot.len().min(len);
    if n == 0 {
        return;
    }
    // SAFETY: `msg` is not null (n > 0, so len > 0) and holds `len` ≥ n bytes by the caller's contract; the slot
    // is n bytes of the channel's mapping, which C holds no pointer into (the library never hands one out), so the
    // two do not overlap.
    unsafe { ptr::copy_nonoverlapping(msg, slot.as_mut_ptr(), n) }
}

/// `buf` checked for null: null is allowed with a capacity of 0 (asking a message's length).
fn buffer(buf: *mut c_void, cap: usize) -> Result<*mut u8, Failure> {
    if buf.is_null() && cap > 0 {
        return Err(Failure::invalid_argument(&format!("the buffer is NULL with a capacity of {cap} bytes")));
    }
    Ok(buf.cast())
}

/// Copies a received message into C's buffer.
///
/// # Safety
/// `buf` holds `cap` writable bytes, and is not null unless `cap` is 0 (see [`buffer`]).
unsafe fn copy_out(message: &[u8], buf: *mut u8, cap: usize) -> Result<(), Failure> {
    if message.len() > cap {
        // The handles read into at most `cap` bytes, so this is a bug of the library, not a message too long.
        return Err(Failure { code: Code::Internal, message: format!("internal error: a message of {} bytes read for a buffer of {cap}", message.len()) });
    }
    if message.is_empty() {
        return Ok(());
    }
    // SAFETY: `buf` is not null (cap ≥ len > 0) and holds `cap` ≥ len writable bytes by the caller's contract;
    // `message` is the handle's own buffer, which C holds no pointer into.
    unsafe { ptr::copy_nonoverlapping(message.as_ptr(), buf, message.len()) };
    Ok(())
}

/// `len` checked for null: a read must say how long its message is.
fn length_out(len: *mut usize) -> Result<*mut usize, Failure> {
    if len.is_null() {
        return Err(Failure::invalid_argument("the length pointer is NULL"));
    }
    Ok(len)
}

#[no_mangle]
pub extern "C" fn partita_ports_open() -> c_int {
    guarded(open_ports)
}

/// # Safety
/// See `partita_sampling_source_open` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_sampling_source_open(name: *const c_char, err: *mut c_int) -> *mut SamplingSourceHandle {
    // SAFETY: forwards this function's contract.
    unsafe { open(name, err, SamplingSourceHandle::open) }
}

/// # Safety
/// See `partita_sampling_write` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_sampling_write(src: *mut SamplingSourceHandle, msg: *const c_void, len: usize) -> c_int {
    guarded(|| {
        // SAFETY: `src` is null (refused) or an open handle, by this function's contract.
        let src = unsafe { handle(src, "sampling source") }?;
        let msg = message(msg, len)?;
        // SAFETY: `msg` holds `len` bytes by this function's contract, and is not null unless len is 0 (checked).
        src.write_with(len, |slot| unsafe { copy_in(msg, len, slot) })
    })
}

/// # Safety
/// See `partita_sampling_source_close` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_sampling_source_close(src: *mut SamplingSourceHandle) {
    // SAFETY: forwards this function's contract.
    unsafe { close(src) }
}

/// # Safety
/// See `partita_sampling_destination_open` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_sampling_destination_open(name: *const c_char, err: *mut c_int) -> *mut SamplingDestinationHandle {
    // SAFETY: forwards this function's contract.
    unsafe { open(name, err, SamplingDestinationHandle::open) }
}

/// # Safety
/// See `partita_sampling_read` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_sampling_read(dst: *mut SamplingDestinationHandle, buf: *mut c_void, cap: usize, len: *mut usize, age_ns: *mut u64, valid: *mut c_int) -> c_int {
    guarded(|| {
        // SAFETY: `dst` is null (refused) or an open handle, by this function's contract.
        let dst = unsafe { handle(dst, "sampling destination") }?;
        let buf = buffer(buf, cap)?;
        let len = length_out(len)?;
        match dst.read(cap) {
            Ok((message, sample)) => {
                // SAFETY: `buf` holds `cap` bytes and is not null unless cap is 0 (checked); `len` is not null
                // (checked) and, with `age_ns` and `valid`, null or writable, by this function's contract.
                unsafe {
                    copy_out(message, buf, cap)?;
                    put(len, message.len());
                    put(age_ns, u64::try_from(sample.age.as_nanos()).unwrap_or(u64::MAX));
                    put(valid, c_int::from(sample.validity == partita_ports::Validity::Valid));
                }
                Ok(())
            }
            Err((failure, needed)) => {
                // SAFETY: `len` is not null (checked) and writable, by this function's contract.
                unsafe { put(len, needed) };
                Err(failure)
            }
        }
    })
}

/// # Safety
/// See `partita_sampling_destination_close` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_sampling_destination_close(dst: *mut SamplingDestinationHandle) {
    // SAFETY: forwards this function's contract.
    unsafe { close(dst) }
}

/// # Safety
/// See `partita_queuing_source_open` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_queuing_source_open(name: *const c_char, err: *mut c_int) -> *mut QueuingSourceHandle {
    // SAFETY: forwards this function's contract.
    unsafe { open(name, err, QueuingSourceHandle::open) }
}

/// # Safety
/// See `partita_queuing_send` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_queuing_send(src: *mut QueuingSourceHandle, msg: *const c_void, len: usize, timeout_ns: i64) -> c_int {
    guarded(|| {
        // SAFETY: `src` is null (refused) or an open handle, by this function's contract.
        let src = unsafe { handle(src, "queuing source") }?;
        let msg = message(msg, len)?;
        // SAFETY: `msg` holds `len` bytes by this function's contract, and is not null unless len is 0 (checked).
        src.send_with(len, timeout_ns, |slot| unsafe { copy_in(msg, len, slot) })
    })
}

/// # Safety
/// See `partita_queuing_source_close` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_queuing_source_close(src: *mut QueuingSourceHandle) {
    // SAFETY: forwards this function's contract.
    unsafe { close(src) }
}

/// # Safety
/// See `partita_queuing_destination_open` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_queuing_destination_open(name: *const c_char, err: *mut c_int) -> *mut QueuingDestinationHandle {
    // SAFETY: forwards this function's contract.
    unsafe { open(name, err, QueuingDestinationHandle::open) }
}

/// # Safety
/// See `partita_queuing_receive` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_queuing_receive(dst: *mut QueuingDestinationHandle, buf: *mut c_void, cap: usize, len: *mut usize, timeout_ns: i64) -> c_int {
    guarded(|| {
        // SAFETY: `dst` is null (refused) or an open handle, by this function's contract.
        let dst = unsafe { handle(dst, "queuing destination") }?;
        let buf = buffer(buf, cap)?;
        let len = length_out(len)?;
        match dst.receive(cap, timeout_ns) {
            Ok(message) => {
                // SAFETY: `buf` holds `cap` bytes and is not null unless cap is 0 (checked); `len` is not null
                // (checked) and writable, by this function's contract.
                unsafe {
                    copy_out(message, buf, cap)?;
                    put(len, message.len());
                }
                Ok(())
            }
            Err((failure, needed)) => {
                // SAFETY: `len` is not null (checked) and writable, by this function's contract.
                unsafe { put(len, needed) };
                Err(failure)
            }
        }
    })
}

/// # Safety
/// See `partita_queuing_destination_close` in the header.
#[no_mangle]
pub unsafe extern "C" fn partita_queuing_destination_close(dst: *mut QueuingDestinationHandle) {
    // SAFETY: forwards this function's contract.
    unsafe { close(dst) }
}

#[no_mangle]
pub extern "C" fn partita_ports_strerror(code: c_int) -> *const c_char {
    catch_unwind(|| Code::from_raw(code).map_or(c"unknown partita ports code", Code::description).as_ptr()).unwrap_or(c"".as_ptr())
}

#[no_mangle]
pub extern "C" fn partita_ports_last_error() -> *const c_char {
    catch_unwind(last_error).unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_ports::{create_status, ChannelMemory, Direction, EndFds, PortEntry, PortKind, Ports};
    use std::os::fd::AsRawFd;

    fn last_error_text() -> String {
        // SAFETY: the library returns a NUL-terminated string that lives until this thread's next failure.
        unsafe { CStr::from_ptr(partita_ports_last_error()) }.to_string_lossy().into_owned()
    }

    fn code(c: Code) -> c_int {
        c as c_int
    }

    /// One end of `memory` as a port named `name`.
    fn end(name: &str, memory: &ChannelMemory, direction: Direction, depth_or_refresh: u64) -> (PortEntry, EndFds) {
        let status = create_status(name).unwrap();
        let fds = match direction {
            Direction::Source => memory.source(status).unwrap(),
            Direction::Destination => memory.destination(status).unwrap(),
        };
        let entry = PortEntry { name: name.into(), kind: memory.kind, direction, max_message: memory.max_message, depth_or_refresh, data_fd: fds.data.as_raw_fd(), status_fd: fds.status.as_raw_fd(), ack_fd: fds.ack.as_ref().map(AsRawFd::as_raw_fd) };
        (entry, fds)
    }

    #[test]
    fn null_names_and_handles_are_refused_before_any_port_is_looked_at() {
        let mut err = 0;
        let mut len = 0usize;
        let mut buf = [0u8; 8];
        // SAFETY: the nulls are what is under test; every other pointer is a live local of the right size.
        unsafe {
            assert!(partita_sampling_source_open(ptr::null(), &mut err).is_null());
            assert_eq!((err, last_error_text().as_str()), (code(Code::InvalidArgument), "the port name is NULL"));
            assert!(partita_queuing_destination_open(ptr::null(), ptr::null_mut()).is_null(), "err may be NULL");
            assert_eq!(partita_sampling_write(ptr::null_mut(), buf.as_ptr().cast(), 1), code(Code::InvalidArgument));
            assert_eq!(last_error_text(), "the sampling source handle is NULL");
            assert_eq!(partita_sampling_read(ptr::null_mut(), buf.as_mut_ptr().cast(), 8, &mut len, ptr::null_mut(), ptr::null_mut()), code(Code::InvalidArgument));
            assert_eq!(partita_queuing_send(ptr::null_mut(), buf.as_ptr().cast(), 1, 0), code(Code::InvalidArgument));
            assert_eq!(partita_queuing_receive(ptr::null_mut(), buf.as_mut_ptr().cast(), 8, &mut len, 0), code(Code::InvalidArgument));
            assert_eq!(last_error_text(), "the queuing destination handle is NULL");
            partita_sampling_source_close(ptr::null_mut());
            partita_sampling_destination_close(ptr::null_mut());
            partita_queuing_source_close(ptr::null_mut());
            partita_queuing_destination_close(ptr::null_mut());
        }
    }

    #[test]
    fn every_code_has_a_text_and_an_unknown_one_says_so() {
        for c in Code::ALL {
            // SAFETY: strerror returns a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(partita_ports_strerror(c as c_int)) };
            assert_eq!(text, c.description());
        }
        // SAFETY: as above.
        let unknown = unsafe { CStr::from_ptr(partita_ports_strerror(42)) };
        assert_eq!(unknown, c"unknown partita ports code");
    }

    /// The one test that gives this process ports (they are read once per process, as from `PARTITA_PORTS`):
    /// a sampling and a queuing channel with both ends here.
    #[test]
    fn lengths_and_pointers_are_checked_against_the_buffer_and_the_channel() {
        let sampling = ChannelMemory::create("c-sampling", PortKind::Sampling, 8, 1).unwrap();
        let queuing = ChannelMemory::create("c-queuing", PortKind::Queuing, 8, 2).unwrap();
        let refresh = 10_000_000_000;
        crate::give_for_test(Ports::from_fds(vec![
            end("pos-out", &sampling, Direction::Source, refresh),
            end("pos-in", &sampling, Direction::Destination, refresh),
            end("q-out", &queuing, Direction::Source, 2),
            end("q-in", &queuing, Direction::Destination, 2),
        ]));
        assert_eq!(partita_ports_open(), code(Code::Ok), "{}", last_error_text());
        let mut err = 1;
        let mut buf = [0u8; 64];
        let (mut len, mut age_ns, mut valid) = (99usize, u64::MAX, -1);
        // SAFETY: every pointer is a live local of the size passed with it, or null where null is under test;
        // handles are used only after their open succeeded and not after their close.
        unsafe {
            // Opening: by name, kind and direction, once.
            assert!(partita_sampling_source_open(c"nothing".as_ptr(), &mut err).is_null());
            assert_eq!(err, code(Code::NoSuchPort));
            assert!(last_error_text().contains("\"nothing\""), "{}", last_error_text());
            assert!(partita_queuing_source_open(c"pos-out".as_ptr(), &mut err).is_null());
            assert_eq!(err, code(Code::WrongPort));
            assert!(partita_sampling_source_open(c"pos-\xff".as_ptr(), &mut err).is_null());
            assert_eq!((err, last_error_text().as_str()), (code(Code::InvalidArgument), "the port name is not UTF-8"));
            let src = partita_sampling_source_open(c"pos-out".as_ptr(), &mut err);
            assert!(!src.is_null() && err == code(Code::Ok));
            assert!(partita_sampling_source_open(c"pos-out".as_ptr(), &mut err).is_null());
            assert_eq!(err, code(Code::AlreadyOpen));
            let dst = partita_sampling_destination_open(c"pos-in".as_ptr(), ptr::null_mut());
            assert!(!dst.is_null());

            // Sampling: nothing yet, then lengths against the channel (8 bytes) and against the buffer.
            assert_eq!(partita_sampling_read(dst, buf.as_mut_ptr().cast(), 64, &mut len, &mut age_ns, &mut valid), code(Code::Empty));
            assert_eq!(len, 0);
            assert_eq!(partita_sampling_write(src, b"123456789".as_ptr().cast(), 9), code(Code::TooLarge));
            assert!(last_error_text().contains("9 bytes") && last_error_text().contains("at most 8"), "{}", last_error_text());
            assert_eq!(partita_sampling_write(src, ptr::null(), 3), code(Code::InvalidArgument));
            assert_eq!(partita_sampling_write(src, ptr::null(), 0), code(Code::Ok), "an empty message needs no pointer");
            assert_eq!(partita_sampling_read(dst, ptr::null_mut(), 0, &mut len, ptr::null_mut(), ptr::null_mut()), code(Code::Ok));
            assert_eq!(len, 0);
            assert_eq!(partita_sampling_write(src, b"abcdef".as_ptr().cast(), 6), code(Code::Ok));
            assert_eq!(partita_sampling_read(dst, ptr::null_mut(), 0, &mut len, ptr::null_mut(), ptr::null_mut()), code(Code::BufferTooSmall), "a length query");
            assert_eq!(len, 6);
            assert_eq!(partita_sampling_read(dst, ptr::null_mut(), 4, &mut len, ptr::null_mut(), ptr::null_mut()), code(Code::InvalidArgument));
            assert_eq!(partita_sampling_read(dst, buf.as_mut_ptr().cast(), 4, &mut len, ptr::null_mut(), ptr::null_mut()), code(Code::BufferTooSmall));
            assert_eq!((len, &buf[4..6]), (6, &[0u8, 0][..]), "nothing written past the buffer's capacity");
            assert_eq!(partita_sampling_read(dst, buf.as_mut_ptr().cast(), 64, ptr::null_mut(), ptr::null_mut(), ptr::null_mut()), code(Code::InvalidArgument));
            assert_eq!(partita_sampling_read(dst, buf.as_mut_ptr().cast(), 64, &mut len, &mut age_ns, &mut valid), code(Code::Ok));
            assert_eq!((&buf[..len], valid), (&b"abcdef"[..], 1));
            assert!(age_ns < refresh, "{age_ns}");
            partita_sampling_source_close(src);
            partita_sampling_destination_close(dst);
            assert!(partita_sampling_destination_open(c"pos-in".as_ptr(), &mut err).is_null(), "a port is opened once per process");
            assert_eq!(err, code(Code::AlreadyOpen));

            // Queuing: full, timeouts, a buffer too small leaves the message queued.
            let src = partita_queuing_source_open(c"q-out".as_ptr(), &mut err);
            let dst = partita_queuing_destination_open(c"q-in".as_ptr(), &mut err);
            assert!(!src.is_null() && !dst.is_null());
            assert_eq!(partita_queuing_receive(dst, buf.as_mut_ptr().cast(), 64, &mut len, 0), code(Code::Empty));
            assert_eq!(partita_queuing_receive(dst, buf.as_mut_ptr().cast(), 64, &mut len, 1_000_000), code(Code::TimedOut));
            assert_eq!(partita_queuing_send(src, b"one".as_ptr().cast(), 3, 0), code(Code::Ok));
            assert_eq!(partita_queuing_send(src, b"two".as_ptr().cast(), 3, -1), code(Code::Ok));
            assert_eq!(partita_queuing_send(src, b"three".as_ptr().cast(), 5, 0), code(Code::Full));
            assert_eq!(partita_queuing_send(src, b"three".as_ptr().cast(), 5, 1_000_000), code(Code::TimedOut));
            assert_eq!(partita_queuing_send(src, b"much too long".as_ptr().cast(), 13, -1), code(Code::TooLarge), "refused before any wait");
            assert_eq!(partita_queuing_receive(dst, buf.as_mut_ptr().cast(), 2, &mut len, 0), code(Code::BufferTooSmall));
            assert_eq!(len, 3);
            for expected in [&b"one"[..], b"two"] {
                assert_eq!(partita_queuing_receive(dst, buf.as_mut_ptr().cast(), 64, &mut len, -1), code(Code::Ok));
                assert_eq!(&buf[..len], expected);
            }
            assert_eq!(partita_queuing_receive(dst, buf.as_mut_ptr().cast(), 64, ptr::null_mut(), 0), code(Code::InvalidArgument));
            partita_queuing_source_close(src);
            partita_queuing_destination_close(dst);
        }
    }
}
