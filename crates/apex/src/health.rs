//! ARINC 653 health-monitoring services a partition calls (REPORT_APPLICATION_MESSAGE,
//! RAISE_APPLICATION_ERROR). The supervisor keeps each partition's standard error in its partition log, and
//! its health monitor sees how each partition's process ended: those are the two channels used here.
use crate::error::{record, ApexError, Service};
use crate::partition::{application_error, partition_name};
use crate::process::current_name;
use crate::PartitaHypervisor;
use a653rs::bindings::*;

/// A message of the application as shown: lossy UTF-8 (the bytes are the application's), after the name of
/// the process that sent it.
fn from_process(message: &[ApexByte]) -> String {
    let text = String::from_utf8_lossy(message);
    match current_name() {
        Some(process) => format!("process {process}: {}", text.trim_end()),
        None => text.trim_end().to_string(),
    }
}

fn check_length(service: Service, message: &[ApexByte]) -> Result<(), ApexError> {
    if message.len() > MAX_ERROR_MESSAGE_SIZE {
        return Err(ApexError::InvalidParameter { service, problem: format!("a message of {} bytes (at most {MAX_ERROR_MESSAGE_SIZE})", message.len()) });
    }
    Ok(())
}

impl ApexErrorP4 for PartitaHypervisor {
    /// One line on standard error: the partition's name, the calling process's, the message.
    fn report_application_message(message: &[ApexByte]) -> Result<(), ErrorReturnCode> {
        record(check_length(Service::ReportApplicationMessage, message).map(|()| eprintln!("{}: {}", partition_name(), from_process(message))))
    }

    /// Without an error handler (ARINC 653 Part 1's CREATE_ERROR_HANDLER is not offered), an application error
    /// is handled at partition level: the message goes to standard error, and then, with a control page, to
    /// the supervisor as an application_error for its health-monitor tables (the call returns once it
    /// answered); without one, the partition's process exits with [`crate::EXIT_APPLICATION_ERROR`] for the
    /// supervisor's health monitor to apply the partition's action.
    fn raise_application_error(error_code: ErrorCode, message: &[ApexByte]) -> Result<(), ErrorReturnCode> {
        let service = Service::RaiseApplicationError;
        record((|| {
            if error_code != ErrorCode::ApplicationError {
                return Err(ApexError::InvalidParameter { service, problem: format!("error code {error_code:?}: an application raises only APPLICATION_ERROR") });
            }
            check_length(service, message)?;
            application_error(&from_process(message))
        })())
    }
}
