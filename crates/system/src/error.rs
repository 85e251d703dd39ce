//! Errors of reading a system file. Each [`Diagnostic`] names the file, the line and column, the field path
//! and what is wrong together with what to do; [`Errors`] carries all of them, not just the first.
use std::fmt;

/// One thing wrong with a system file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {path}: {problem}")]
pub struct Diagnostic {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// Field path such as `module[camera].plan[0].window[1].start`.
    pub path: String,
    pub problem: Problem,
}

/// What is wrong, and (in the message) how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("cannot read the file: {0}")]
    Unreadable(String),
    #[error("{0} (see docs/configuration.md for every key)")]
    Syntax(String),
    #[error("{0}")]
    BadValue(String),
    #[error("name {name:?} is not allowed; use 1 to {max} characters from [A-Za-z0-9_-], starting with a letter or digit")]
    BadName { name: String, max: usize },
    #[error("{what} {name:?} is defined twice (first on line {first_line}); give each {what} its own name")]
    Duplicate { what: &'static str, name: String, first_line: usize },
    #[error("the command is empty; give the program and its arguments, e.g. [\"partita\", \"app\", \"probe\"]")]
    EmptyCommand,
    #[error("memory limit {memory} is below the floor of {floor}; give at least {floor}")]
    MemoryTooSmall { memory: String, floor: String },
    #[error("SCHED_FIFO priority {priority} is out of range; give 1..={max} (the plan executors run at {}, above every partition)", .max + 1)]
    FifoPriority { priority: u64, max: u8 },
    #[error("uid {uid} cannot be a partition's root: give a host uid from 1 to {max} (65536 ids are mapped from it)")]
    BadUid { uid: u64, max: u32 },
    #[error("uid {uid} overlaps partition {other:?}'s {range} ids; give each partition its own range (or leave `uid` out)")]
    UidOverlap { uid: u64, other: String, range: u32 },
    #[error("{name:?} is not a capability; name one of capabilities(7), e.g. \"CAP_NET_BIND_SERVICE\"")]
    UnknownCapability { name: String },
    #[error("{name:?} is not a system call the default seccomp profile refuses; see docs/security.md for the list")]
    UnknownSyscall { name: String },
    #[error("pids limit must be at least 1")]
    PidsZero,
    #[error("pids limit is above the kernel's limit of {max} processes; give at most {max}")]
    PidsTooMany { max: u64 },
    #[error("a NUL byte cannot be passed to a program; remove it")]
    NulByte,
    #[error("{name:?} is not an environment variable name; use a non-empty name without `=` or NUL")]
    BadEnvName { name: String },
    #[error("{name} is set by the supervisor for every partition; remove it (partita writes the DDS configuration and the PARTITA_* variables itself)")]
    ReservedEnv { name: String },
    #[error("program {program:?} is not in PATH on this machine; give its full path or install it")]
    ProgramNotFound { program: String },
    #[error("{program:?} is not an executable file on this machine; give the path of a program")]
    ProgramNotExecutable { program: String },
    #[error("domain id {id} is out of range; use 0..=232")]
    DomainOutOfRange { id: u64 },
    #[error("domain {id} is already used by {other}; give each network its own domain id")]
    DomainTaken { id: u32, other: String },
    #[error("subnet {subnet} is outside 198.18.0.0/15; partita uses only that range (e.g. 198.18.4.0/24)")]
    SubnetOutsidePool { subnet: String },
    #[error("subnet {subnet} is too small; use a prefix of /30 or shorter")]
    SubnetTooSmall { subnet: String },
    #[error("subnet {subnet} overlaps {other}'s {other_subnet}; choose disjoint subnets or leave `subnet` out to get one assigned")]
    SubnetOverlap { subnet: String, other: String, other_subnet: String },
    #[error("198.18.0.0/15 has no free /24 left for {what}; give explicit smaller subnets or fewer modules")]
    PoolExhausted { what: String },
    #[error("address {address} is not a usable host of {subnet}; pick one inside it or leave `address` out")]
    AddressOutsideSubnet { address: String, subnet: String },
    #[error("address {address} is already used by {other}; pick another or leave `address` out")]
    AddressTaken { address: String, other: String },
    #[error("subnet {subnet} has no free address left for {what}; use a larger subnet")]
    AddressesExhausted { subnet: String, what: String },
    #[error("unknown criticality {0:?}; use \"high\", \"medium\" or \"low\"")]
    BadCriticality(String),
    #[error("unknown health action {0:?}; use \"restart\", \"stop\" or \"ignore\"")]
    BadHealthAction(String),
    #[error("`{key}` only applies to action = \"restart\"; remove it")]
    HealthKeyWithoutRestart { key: &'static str },
    #[error("CPU {cpu} is not available on this machine (available: {available}); use one of those")]
    CpuNotAvailable { cpu: u64, available: String },
    #[error("CPU {cpu} is listed twice; list each CPU once")]
    DuplicateCpu { cpu: u64 },
    #[error("CPU {cpu} is already used by module {other}; give each module its own CPUs")]
    CpuTakenByModule { cpu: u64, other: String },
    #[error("CPU {cpu} is not one of the module's CPUs ({module_cpus}); add it to the module's `cpus` or use one of those")]
    CpuNotInModule { cpu: u64, module_cpus: String },
    #[error("CPU {cpu} of the module has no plan; add a [[module.plan]] with cpu = {cpu} or remove the CPU")]
    CpuWithoutPlan { cpu: u64 },
    #[error("CPU {cpu} has two plans; merge their windows into one [[module.plan]]")]
    DuplicatePlan { cpu: u64 },
    #[error("the major frame must be longer than zero")]
    ZeroFrame,
    #[error("the major frame is longer than {max}; use a shorter cycle (a plan repeats every frame, and stopping waits for at most one window)")]
    FrameTooLong { max: String },
    #[error("partition {partition:?} already has windows in plan[{other}] (CPU {cpu}); one executor runs a partition: keep its windows in one plan")]
    PartitionInTwoPlans { partition: String, cpu: u64, other: usize },
    #[error("a window must be longer than zero")]
    ZeroWindow,
    #[error("freeze_ahead {ahead} is more than a fifth of window[{window}] ({partition}, {duration}), which another partition's window follows; use a shorter freeze_ahead (tens of µs) or a longer window")]
    FreezeAheadTooLong { ahead: String, window: usize, partition: String, duration: String },
    #[error("wake_ahead {ahead}: no window of this plan starts after time in which no partition runs, so the executor would never use it; set freeze_ahead longer than wake_ahead, leave a gap before a window, or remove wake_ahead")]
    WakeAheadUnused { ahead: String },
    #[error("wake_ahead {ahead} is not shorter than freeze_ahead {freeze}: the executor would hold the CPU for the whole time the partition frozen ahead has to stop; use a wake_ahead shorter than freeze_ahead (a third of it or less)")]
    WakeAheadNotShorter { ahead: String, freeze: String },
    #[error("the window ends at {end}, beyond the major frame of {frame}; shorten it, move it earlier or lengthen major_frame")]
    WindowBeyondFrame { end: String, frame: String },
    #[error("the window [{start}, {end}) overlaps window[{other}] [{other_start}, {other_end}); start it at {other_end} or later")]
    WindowOverlap { start: String, end: String, other: usize, other_start: String, other_end: String },
    #[error("no partition {name:?} in this module (partitions: {known}); fix the name or add the partition")]
    UnknownPartition { name: String, known: String },
    #[error("partition {partition:?} may not run on CPU {cpu} (its cpus: {cpus}); add the CPU to the partition's `cpus` or move the window")]
    WindowOnForeignCpu { partition: String, cpu: u64, cpus: String },
    #[error("partition {name:?} has no window in any plan, so it would never run; add a window for it")]
    NoWindow { name: String },
    #[error("a second I/O partition (the first is {first:?}); a module has one I/O partition, set io = false on the others")]
    SecondIoPartition { first: String },
    #[error("only the I/O partition runs the routing service; set io = true on this partition or remove its router table")]
    RouterNotIo,
    #[error("{problem}; {fix} (the router's keys are in docs/router.md; its sides are `module` and `network`)")]
    Router { problem: String, fix: String },
    #[error("plan {name:?} has two [[module.plan]] tables for CPU {cpu} (the first is plan[{first}]); merge their windows into one")]
    DuplicateNamedPlan { name: String, cpu: u64, first: usize },
    #[error("plan {plan:?} has no [[module.plan]] for CPU {cpu}, which plan {other:?} schedules; every plan of a module covers the same CPUs: add a [[module.plan]] with name = {plan:?}, cpu = {cpu}")]
    PlanMissingCpu { plan: String, cpu: u64, other: String },
    #[error("partition {partition:?} runs on CPU {cpu} in plan {other_plan:?} (plan[{other}]); one executor runs a partition in every plan: keep its windows on CPU {cpu} in every plan")]
    PartitionOnTwoCpus { partition: String, cpu: u64, other_plan: String, other: usize },
    #[error("default_plan {name:?} names no plan of the module (its plans: {known}); name one of them")]
    UnknownDefaultPlan { name: String, known: String },
    #[error("the module has several plans ({known}) and none is named \"default\"; set default_plan to the one `up` starts with")]
    NoDefaultPlan { known: String },
    #[error("a system partition requests plan switches, and module {module:?} has no plan; remove system_partition or give the module [[module.plan]] tables")]
    SystemPartitionWithoutPlans { module: String },
    #[error("{kind:?} is not an error kind; use one of {}", crate::model::ErrorKind::words())]
    UnknownErrorKind { kind: String },
    #[error("unknown health-monitor action {action:?}; use one of {}", crate::model::HmAction::WORDS.join(", "))]
    UnknownHmAction { action: String },
    #[error("{action} is not an action of a {level}-level table (it takes {allowed}); {fix}")]
    HmActionNotAllowed { action: &'static str, level: crate::model::HmLevel, allowed: String, fix: String },
    #[error("switch_plan needs the plan to switch to; add plan = \"…\" naming one of the module's plans ({known})")]
    SwitchPlanWithoutPlan { known: String },
    #[error("module {module:?} has no plan {name:?} (its plans: {known}); name one of them, or add [[module.plan]] tables with name = {name:?}")]
    UnknownPlan { name: String, module: String, known: String },
    #[error("`plan` only applies to switch_plan (as `action` or `then`); remove it or make the action switch_plan")]
    PlanWithoutSwitch,
}

/// All the problems found in one system file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Errors(pub Vec<Diagnostic>);

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "error: {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}
