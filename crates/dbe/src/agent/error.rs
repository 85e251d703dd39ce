use std::fmt;

/// What went wrong in an agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The middleware refused or failed an operation.
    #[error("{implementation}: {what}: {message}")]
    Middleware { implementation: &'static str, what: String, message: String },
    /// An argument the agent cannot use.
    #[error("argument {flag}: {message}")]
    Argument { flag: String, message: String },
    /// The peers did not show up in time.
    #[error("{implementation}: {what} not matched within {seconds} s (matched so far: {matched})")]
    NotMatched { implementation: &'static str, what: String, seconds: u64, matched: String },
    /// The implementation cannot do what the test asks (a QoS, a transport, a role).
    #[error("{implementation} does not support {what}")]
    Unsupported { implementation: &'static str, what: String },
}

impl AgentError {
    /// A middleware error with the operation that failed.
    pub fn middleware(implementation: &'static str, what: impl Into<String>, err: impl fmt::Display) -> AgentError {
        AgentError::Middleware { implementation, what: what.into(), message: err.to_string() }
    }
}
