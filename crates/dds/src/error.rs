//! Errors of the DDS layer: every failure names the entity, the call and Cyclone's return code as text.
use std::ffi::CStr;

/// A failure of the DDS layer.
#[derive(Debug, thiserror::Error)]
pub enum DdsError {
    /// A Cyclone DDS call returned an error code.
    #[error("{call} on {entity} failed: {text} (return code {code})")]
    Call { entity: String, call: &'static str, code: i32, text: String },
    /// A blocking call ran out of time.
    #[error("{what}: timed out after {timeout:?}")]
    Timeout { what: String, timeout: std::time::Duration },
    /// The participant configuration is not usable.
    #[error("DDS configuration: {0}")]
    Config(String),
    /// A Rust type cannot be described as a DDS type.
    #[error("type {type_name}: {reason}")]
    Type { type_name: String, reason: String },
    /// A sample could not be encoded or decoded as CDR.
    #[error("CDR: {0}")]
    Cdr(#[from] crate::cdr::CdrError),
    /// A string passed to Cyclone contains a NUL byte.
    #[error("{what} contains a NUL byte: {value:?}")]
    Nul { what: &'static str, value: String },
}

pub type Result<T> = std::result::Result<T, DdsError>;

/// The return code of a call that ran out of time (Cyclone's `DDS_RETCODE_TIMEOUT`): a reliable writer whose
/// history stayed full for its max blocking time.
pub const RETCODE_TIMEOUT: i32 = cyclors::DDS_RETCODE_TIMEOUT as i32;

/// Cyclone's text for a return code.
pub(crate) fn retcode_text(code: i32) -> String {
    // SAFETY: dds_strretcode returns a pointer to a static, NUL-terminated string for every code.
    unsafe {
        let p = cyclors::dds_strretcode(code);
        if p.is_null() {
            return format!("unknown return code {code}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Turns a Cyclone return value (negative = error) into a Result carrying the value.
pub(crate) fn check(ret: i32, call: &'static str, entity: impl FnOnce() -> String) -> Result<i32> {
    if ret < 0 {
        Err(DdsError::Call { entity: entity(), call, code: ret, text: retcode_text(ret) })
    } else {
        Ok(ret)
    }
}

pub(crate) fn cstring(what: &'static str, value: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(value).map_err(|_| DdsError::Nul { what, value: value.to_string() })
}
