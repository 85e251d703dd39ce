//! The partition's control page (`PARTITA_CONTROL`, [`partita_ports::control`]) as the APEX services use it:
//! taken over once per process, at the first service that needs it; and ARINC 653 Part 2's module schedules
//! (SET_MODULE_SCHEDULE, GET_MODULE_SCHEDULE_STATUS, GET_MODULE_SCHEDULE_ID) on the page's plans.
use crate::error::{record, ApexError, Service};
use crate::PartitaHypervisor;
use a653rs::bindings::*;
use partita_ports::control::{Control, Outcome, Request};
use std::sync::OnceLock;
use std::time::Duration;

/// How long a service waits for the supervisor: its answer to a request, and after a mode change it accepted
/// (IDLE, COLD_START, WARM_START), for it to freeze or end the partition's process. Time the partition spends
/// frozen counts.
pub(crate) const SUPERVISOR_WAIT: Duration = Duration::from_secs(5);

/// The page, when the supervisor gave one. A page that is set but not usable is said once on standard error,
/// and the services then behave as without one.
pub(crate) fn page() -> Option<&'static Control> {
    static PAGE: OnceLock<Option<Control>> = OnceLock::new();
    PAGE.get_or_init(|| match Control::from_env() {
        Ok(page) => page,
        Err(e) => {
            eprintln!("{}: {e}; the partition goes on without its control page", crate::partition::partition_name());
            None
        }
    })
    .as_ref()
}

/// Posts `request` and waits for the answer ([`SUPERVISOR_WAIT`]).
pub(crate) fn ask(service: Service, page: &Control, request: &Request) -> Result<Outcome, ApexError> {
    page.request(request, SUPERVISOR_WAIT).map_err(|source| ApexError::Control { service, source })
}

/// `s` cut to at most `max` bytes, at a character's boundary.
pub(crate) fn truncated(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn schedule_id(index: u64) -> ScheduleId {
    ScheduleId::try_from(index).unwrap_or(ScheduleId::MAX)
}

/// Schedules are the module's named plans; a schedule's id is its plan's index in the page (0: the plan the
/// module started with). Only a system partition (`system_partition = true`) may switch: the supervisor
/// refuses any other, which is INVALID_CONFIG. The switch happens at the end of the current major frame: the
/// service returns once the supervisor accepted it, and GET_MODULE_SCHEDULE_STATUS shows it pending until then.
impl ApexScheduleP2 for PartitaHypervisor {
    fn set_module_schedule(schedule_id: ScheduleId) -> Result<(), ErrorReturnCode> {
        record(set_schedule(schedule_id))
    }

    fn get_module_schedule_status() -> Result<ApexScheduleStatus, ErrorReturnCode> {
        let service = Service::GetModuleScheduleStatus;
        record((|| {
            let page = page().ok_or(ApexError::NoControlPage { service })?;
            Ok(ApexScheduleStatus {
                time_of_last_schedule_switch: ApexSystemTime::try_from(page.last_switch_ns()).unwrap_or(ApexSystemTime::MAX),
                current_schedule: schedule_id(page.plan()),
                next_schedule: schedule_id(page.next_plan()),
            })
        })())
    }

    fn get_module_schedule_id(schedule_name: ScheduleName) -> Result<ScheduleId, ErrorReturnCode> {
        let service = Service::GetModuleScheduleId;
        record((|| {
            let end = schedule_name.iter().position(|&b| b == 0).unwrap_or(schedule_name.len());
            let name = std::str::from_utf8(&schedule_name[..end]).ok().filter(|n| !n.is_empty()).ok_or(ApexError::BadName { service, what: "the schedule's name" })?;
            let page = page().ok_or(ApexError::NoControlPage { service })?;
            page.plan_index(name).map(schedule_id).ok_or_else(|| ApexError::UnknownName { service, what: "schedule (plan)", name: name.to_string() })
        })())
    }
}

fn set_schedule(id: ScheduleId) -> Result<(), ApexError> {
    let service = Service::SetModuleSchedule;
    let page = page().ok_or(ApexError::NoControlPage { service })?;
    let unknown = || ApexError::UnknownId { service, what: "schedule (plan)", id };
    let index = u64::try_from(id).ok().filter(|&i| page.plan_name(i).is_some()).ok_or_else(unknown)?;
    match ask(service, page, &Request::SwitchPlan(index))? {
        Outcome::Done => Ok(()),
        Outcome::Refused => Err(ApexError::Refused { service, problem: "only a system partition (system_partition = true in the system file) may switch the module's plan".into() }),
        Outcome::NoSuchPlan => Err(unknown()),
        Outcome::Invalid => Err(ApexError::InvalidParameter { service, problem: format!("the supervisor found the request for schedule {id} invalid") }),
    }
}
