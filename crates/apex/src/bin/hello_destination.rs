//! partita-apex-hello-destination: the other end of partita-apex-hello-source, written against a653rs alone
//! (only its hypervisor type is partita's). One line on standard output per message it gets:
//!
//! ```text
//! hello counter=3 validity=valid age_us=412
//! greetings message="greeting 3"
//! ```
//!
//! A periodic process reads the sampling port `hello` every 50 ms and prints each new counter with the
//! message's validity and age; an aperiodic one waits on the queuing port `greetings` and prints each message.
//!
//! Usage: `partita-apex-hello-destination [--count N]`: with a count, each process returns once it has got the
//! N-th message of its port and the partition ends (exit code 0); without, it runs until a stop signal.
//!
//! As in the source, the `#[a653rs::partition]` macro's generated code has `unsafe` blocks; this file has none
//! of its own.
use a653rs::prelude::PartitionExt;
use std::sync::OnceLock;

#[path = "../hello_args.rs"]
mod hello_args;
use hello_args::count_argument;

/// Messages to get on each port before its process returns; `None`: until a stop signal.
static COUNT: OnceLock<Option<u64>> = OnceLock::new();

fn main() {
    match count_argument(std::env::args().skip(1)) {
        Ok(count) => COUNT.set(count).expect("set once, here"),
        Err(problem) => {
            eprintln!("partita-apex-hello-destination: {problem}; usage: partita-apex-hello-destination [--count N]");
            std::process::exit(2);
        }
    }
    hello_destination::Partition.run()
}


#[a653rs::partition(partita_apex::PartitaHypervisor)]
mod hello_destination {
    /// The source writes every 100 ms: a message older than 500 ms means the source has stopped or is starved.
    #[sampling_in(name = "hello", msg_size = "16B", refresh_period = "500ms")]
    struct Hello;

    #[queuing_in(name = "greetings", msg_count = 8, msg_size = "32B", discipline = "FIFO")]
    struct Greetings;

    #[start(cold)]
    fn cold_start(mut ctx: start::Context) {
        ctx.create_hello().unwrap();
        ctx.create_greetings().unwrap();
        ctx.create_read_hello().unwrap().start().unwrap();
        ctx.create_receive_greetings().unwrap().start().unwrap();
    }

    #[start(warm)]
    fn warm_start(ctx: start::Context) {
        cold_start(ctx)
    }

    #[periodic(period = "50ms", time_capacity = "Infinite", stack_size = "256KB", base_priority = 1, deadline = "Soft")]
    fn read_hello(ctx: read_hello::Context) {
        let hello = ctx.hello.unwrap();
        let count = super::COUNT.get().copied().flatten();
        let mut last = 0u64;
        loop {
            let mut buf = [0u8; 16];
            match hello.receive(&mut buf) {
                Ok((validity, message)) if message.len() == 16 => {
                    let counter = u64::from_le_bytes(message[..8].try_into().unwrap());
                    let written_ns = u64::from_le_bytes(message[8..].try_into().unwrap());
                    // Read every 50 ms, written every 100 ms: print each message once.
                    if counter != last {
                        let now_ns = ctx.get_time().unwrap_duration().as_nanos() as u64;
                        let validity = if validity == Validity::Valid { "valid" } else { "invalid" };
                        println!("hello counter={counter} validity={validity} age_us={}", now_ns.saturating_sub(written_ns) / 1000);
                        last = counter;
                    }
                    if count.is_some_and(|n| counter >= n) {
                        return;
                    }
                }
                Ok((_, message)) => {
                    let _ = ctx.report_application_message(format!("hello: a message of {} bytes, not 16", message.len()).as_bytes());
                }
                // Nothing written yet.
                Err(Error::NoAction) => {}
                Err(e) => {
                    let _ = ctx.report_application_message(format!("hello: {e:?}").as_bytes());
                }
            }
            ctx.periodic_wait().unwrap();
        }
    }

    #[aperiodic(time_capacity = "Infinite", stack_size = "256KB", base_priority = 1, deadline = "Soft")]
    fn receive_greetings(ctx: receive_greetings::Context) {
        let greetings = ctx.greetings.unwrap();
        let count = super::COUNT.get().copied().flatten();
        let mut got = 0u64;
        loop {
            let mut buf = [0u8; 32];
            match greetings.receive(&mut buf, SystemTime::Infinite) {
                Ok((message, _overflow)) => {
                    println!("greetings message={:?}", String::from_utf8_lossy(message));
                    got += 1;
                    if Some(got) == count {
                        return;
                    }
                }
                Err(e) => {
                    let _ = ctx.report_application_message(format!("greetings: {e:?}").as_bytes());
                }
            }
        }
    }
}
