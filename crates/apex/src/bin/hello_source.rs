//! partita-apex-hello-source: an ARINC 653 partition written against a653rs alone (only its hypervisor type is
//! partita's). Every 100 ms its periodic process writes a counter and the time to the sampling port `hello`
//! and sends `greeting <counter>` on the queuing port `greetings`, and prints `sent counter=<n>`.
//!
//! Usage: `partita-apex-hello-source [--count N]`: with a count, the process returns after its N-th message
//! and the partition ends (exit code 0); without, it runs until a stop signal (SIGTERM, exit code 0).
//!
//! The partition's processes are the `#[a653rs::partition]` macro's, whose generated code keeps its ports and
//! processes in `static mut` items behind `unsafe` blocks: this file cannot forbid `unsafe` code, and has none
//! of its own.
use a653rs::prelude::PartitionExt;
use std::sync::OnceLock;

#[path = "../hello_args.rs"]
mod hello_args;
use hello_args::count_argument;

/// Messages to send before the process returns; `None`: until a stop signal.
static COUNT: OnceLock<Option<u64>> = OnceLock::new();

fn main() {
    match count_argument(std::env::args().skip(1)) {
        Ok(count) => COUNT.set(count).expect("set once, here"),
        Err(problem) => {
            eprintln!("partita-apex-hello-source: {problem}; usage: partita-apex-hello-source [--count N]");
            std::process::exit(2);
        }
    }
    hello_source::Partition.run()
}


#[a653rs::partition(partita_apex::PartitaHypervisor)]
mod hello_source {
    use core::time::Duration;

    /// A message of 16 bytes: the counter, then the time it was written (ns of CLOCK_MONOTONIC), both u64
    /// little-endian.
    #[sampling_out(name = "hello", msg_size = "16B")]
    struct Hello;

    #[queuing_out(name = "greetings", msg_count = 8, msg_size = "32B", discipline = "FIFO")]
    struct Greetings;

    #[start(cold)]
    fn cold_start(mut ctx: start::Context) {
        ctx.create_hello().unwrap();
        ctx.create_greetings().unwrap();
        ctx.create_send().unwrap().start().unwrap();
    }

    #[start(warm)]
    fn warm_start(ctx: start::Context) {
        cold_start(ctx)
    }

    #[periodic(period = "100ms", time_capacity = "Infinite", stack_size = "256KB", base_priority = 1, deadline = "Soft")]
    fn send(ctx: send::Context) {
        let hello = ctx.hello.unwrap();
        let greetings = ctx.greetings.unwrap();
        let count = super::COUNT.get().copied().flatten();
        for counter in 1u64.. {
            let now = ctx.get_time().unwrap_duration().as_nanos() as u64;
            let mut sample = [0u8; 16];
            sample[..8].copy_from_slice(&counter.to_le_bytes());
            sample[8..].copy_from_slice(&now.to_le_bytes());
            hello.send(&sample).unwrap();
            // Not waiting for room: a full queue means the destination is not keeping up, and the next
            // sampling write is due in 100 ms whatever happens to this greeting.
            let greeting = format!("greeting {counter}");
            if let Err(e) = greetings.send(greeting.as_bytes(), SystemTime::Normal(Duration::ZERO)) {
                let _ = ctx.report_application_message(format!("{greeting} not sent: {e:?}").as_bytes());
            }
            println!("sent counter={counter}");
            if Some(counter) == count {
                return;
            }
            ctx.periodic_wait().unwrap();
        }
    }
}
