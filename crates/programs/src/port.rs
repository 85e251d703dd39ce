//! `partita app port …`: a partition's ARINC 653 ports from the shell. Each command opens one port of the
//! partition's (`PARTITA_PORTS`), does one thing and prints one line per message, so that a shell script in a
//! partition without a network (or an operator looking into one) can use ports:
//!
//! - `list`: the ports this partition was given;
//! - `write NAME TEXT`: a sampling message; `read NAME`: the latest one, its age and validity;
//! - `send NAME TEXT`: a queuing message; `receive NAME`: the oldest one.
//!
//! Messages are the text given (UTF-8), or bytes in hex with `--hex`. A timeout of 0 does not wait.
//!
//! Two more measure a sampling channel under the plan: `stamp NAME` writes a message every `--interval` for
//! `--seconds`, and `watch NAME` polls the channel's destination and records, for each new message, its age
//! when first seen (write → visible, on the machine's CLOCK_MONOTONIC that every partition shares): a
//! partition frozen outside its windows sees what was written meanwhile at its next window's start.
use crate::fail;
use clap::{Args, Subcommand};
use partita_ports::{PortError, Ports, Timeout, Validity};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct PortArgs {
    #[command(subcommand)]
    command: PortCommand,
}

#[derive(Subcommand)]
enum PortCommand {
    /// The ports this partition was given: name, kind, direction, maximum message, depth or refresh.
    List,
    /// Writes a sampling message.
    Write {
        name: String,
        message: String,
        #[arg(long)]
        hex: bool,
    },
    /// Reads the latest sampling message: `len=N age_us=N valid|invalid seq=N MESSAGE`.
    Read {
        name: String,
        #[arg(long)]
        hex: bool,
        /// Read this many times, --interval apart.
        #[arg(long, default_value_t = 1)]
        count: u64,
        #[arg(long, value_parser = crate::vm_runner::parse_duration, default_value = "100ms")]
        interval: Duration,
    },
    /// Sends a queuing message, waiting up to --timeout for room.
    Send {
        name: String,
        message: String,
        #[arg(long)]
        hex: bool,
        #[arg(long, value_parser = crate::vm_runner::parse_duration, default_value = "0s")]
        timeout: Duration,
    },
    /// Writes a message every --interval for --seconds (each its sequence number as text), into a sampling or a
    /// queuing source (a full queue refuses the message: counted).
    Stamp {
        name: String,
        #[arg(long, value_parser = crate::vm_runner::parse_duration, default_value = "20us")]
        interval: Duration,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Watches a destination until --count new messages were seen (or --seconds passed) and prints one JSON line:
    /// each message's age when seen (a sampling destination polled: its first sight of each new message; a
    /// queuing one: when its receive returns), as p50/p99/max in µs, and how many were seen.
    Watch {
        name: String,
        #[arg(long, default_value_t = 1000)]
        count: u64,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// Also write every age (ns, one per line) to this file.
        #[arg(long)]
        samples: Option<std::path::PathBuf>,
    },
    /// Receives queuing messages: `len=N age_us=N MESSAGE`, waiting up to --timeout for each.
    Receive {
        name: String,
        #[arg(long)]
        hex: bool,
        #[arg(long, default_value_t = 1)]
        count: u64,
        #[arg(long, value_parser = crate::vm_runner::parse_duration, default_value = "0s")]
        timeout: Duration,
    },
}

fn timeout(d: Duration) -> Timeout {
    if d.is_zero() {
        Timeout::Immediate
    } else {
        Timeout::After(d)
    }
}

fn bytes(message: &str, hex: bool) -> Result<Vec<u8>, String> {
    if !hex {
        return Ok(message.as_bytes().to_vec());
    }
    if message.len() % 2 != 0 {
        return Err(format!("{message:?} is not hex: an odd number of digits"));
    }
    (0..message.len()).step_by(2).map(|i| u8::from_str_radix(&message[i..i + 2], 16).map_err(|_| format!("{message:?} is not hex"))).collect()
}

fn show(b: &[u8], hex: bool) -> String {
    if hex {
        b.iter().map(|x| format!("{x:02x}")).collect()
    } else {
        String::from_utf8_lossy(b).into_owned()
    }
}

fn age_us(written_ns: u64) -> u64 {
    partita_os::clock::monotonic_ns().saturating_sub(written_ns) / 1_000
}

pub fn run(a: PortArgs) -> ExitCode {
    match port(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("port", &e),
    }
}

fn port(a: PortArgs) -> Result<(), String> {
    let mut ports = Ports::from_env().map_err(|e| e.to_string())?;
    let err = |e: PortError| e.to_string();
    match a.command {
        PortCommand::List => {
            for p in ports.list() {
                let geometry = match p.kind {
                    partita_ports::PortKind::Sampling => format!("refresh {} µs", p.depth_or_refresh / 1_000),
                    partita_ports::PortKind::Queuing => format!("depth {}", p.depth_or_refresh),
                };
                println!("{} {} {} max {} B {}", p.name, p.kind.as_str(), p.direction.as_str(), p.max_message, geometry);
            }
        }
        PortCommand::Write { name, message, hex } => {
            let mut port = ports.sampling_source(&name).map_err(err)?;
            port.write(&bytes(&message, hex)?).map_err(err)?;
        }
        PortCommand::Read { name, hex, count, interval } => {
            let mut port = ports.sampling_destination(&name).map_err(err)?;
            let mut buf = vec![0u8; port.max_message() as usize];
            for i in 0..count {
                if i > 0 {
                    std::thread::sleep(interval);
                }
                let s = port.read(&mut buf).map_err(err)?;
                let valid = if s.validity == Validity::Valid { "valid" } else { "invalid" };
                println!("len={} age_us={} {valid} seq={} {}", s.len, s.age.as_micros(), s.sequence, show(&buf[..s.len], hex));
            }
        }
        PortCommand::Stamp { name, interval, seconds } => {
            partita_os::signal::install_stop_signals();
            let queuing = ports.list().any(|p| p.name == name && p.kind == partita_ports::PortKind::Queuing);
            let (mut sampling, mut queue) = if queuing { (None, Some(ports.queuing_source(&name).map_err(err)?)) } else { (Some(ports.sampling_source(&name).map_err(err)?), None) };
            let end = std::time::Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
            let (mut n, mut full): (u64, u64) = (0, 0);
            let mut next = partita_os::clock::monotonic_ns();
            while std::time::Instant::now() < end && !partita_os::signal::stop_requested() {
                n += 1;
                let text = n.to_string();
                match (&mut sampling, &mut queue) {
                    (Some(s), _) => s.write(text.as_bytes()).map_err(err)?,
                    (_, Some(q)) => match q.send(text.as_bytes(), Timeout::Immediate) {
                        Ok(()) => {}
                        Err(PortError::Full { .. }) => full += 1,
                        Err(e) => return Err(e.to_string()),
                    },
                    _ => unreachable!("one of the two is open"),
                }
                next += interval.as_nanos() as u64;
                partita_os::clock::sleep_until_ns(next.max(partita_os::clock::monotonic_ns()));
            }
            println!("stamp: {n} messages, {full} refused by a full queue");
        }
        PortCommand::Watch { name, count, seconds, samples } => {
            partita_os::signal::install_stop_signals();
            let queuing = ports.list().any(|p| p.name == name && p.kind == partita_ports::PortKind::Queuing);
            let end = std::time::Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
            let mut ages: Vec<u64> = Vec::new();
            if queuing {
                // Every message, received as a blocked reader would: its age when the receive returns.
                let mut port = ports.queuing_destination(&name).map_err(err)?;
                let mut buf = vec![0u8; port.max_message() as usize];
                // What was queued before the watch began is not measured.
                while port.receive(&mut buf, Timeout::Immediate).is_ok() {}
                while (ages.len() as u64) < count && std::time::Instant::now() < end && !partita_os::signal::stop_requested() {
                    match port.receive(&mut buf, Timeout::After(Duration::from_millis(100))) {
                        Ok(r) => ages.push(partita_os::clock::monotonic_ns().saturating_sub(r.written_ns)),
                        Err(PortError::TimedOut { .. }) => {}
                        Err(e) => return Err(e.to_string()),
                    }
                }
            } else {
                let mut port = ports.sampling_destination(&name).map_err(err)?;
                let mut buf = vec![0u8; port.max_message() as usize];
                let mut last: Option<u64> = None;
                while (ages.len() as u64) < count && std::time::Instant::now() < end && !partita_os::signal::stop_requested() {
                    match port.read(&mut buf) {
                        // The first message seen only starts the watch: it may have been written long before.
                        Ok(s) if last.is_none() => last = Some(s.sequence),
                        Ok(s) if Some(s.sequence) != last => {
                            last = Some(s.sequence);
                            ages.push(s.age.as_nanos() as u64);
                        }
                        Ok(_) | Err(PortError::Empty { .. }) => std::hint::spin_loop(),
                        Err(e) => return Err(e.to_string()),
                    }
                }
            }
            if let Some(path) = samples {
                let text: String = ages.iter().map(|a| format!("{a}\n")).collect();
                std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            let s = partita_apps::summary::Summary::of_ns(&ages);
            println!("{{\"seen\": {}, \"p50_us\": {:.1}, \"p99_us\": {:.1}, \"max_us\": {:.1}}}", ages.len(), s.p50_us, s.p99_us, s.max_us);
        }
        PortCommand::Send { name, message, hex, timeout: t } => {
            let mut port = ports.queuing_source(&name).map_err(err)?;
            port.send(&bytes(&message, hex)?, timeout(t)).map_err(err)?;
        }
        PortCommand::Receive { name, hex, count, timeout: t } => {
            let mut port = ports.queuing_destination(&name).map_err(err)?;
            let mut buf = vec![0u8; port.max_message() as usize];
            for _ in 0..count {
                let r = port.receive(&mut buf, timeout(t)).map_err(err)?;
                println!("len={} age_us={} {}", r.len, age_us(r.written_ns), show(&buf[..r.len], hex));
            }
        }
    }
    Ok(())
}
