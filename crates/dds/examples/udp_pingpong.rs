//! Quick raw-UDP round-trip probe on loopback: `udp_pingpong N SIZE [spin]` (starts its own echo thread? no:
//! a child process echoes, so both sides pay the same process wake-ups as the DDS probe).
use std::net::UdpSocket;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args[1] == "pong" {
        let s = UdpSocket::bind("127.0.0.1:47000").unwrap();
        let mut buf = vec![0u8; 65536];
        loop {
            let (n, from) = s.recv_from(&mut buf).unwrap();
            s.send_to(&buf[..n], from).unwrap();
        }
    }
    let n: usize = args[2].parse().unwrap();
    let size: usize = args[3].parse().unwrap();
    let spin = args.get(4).is_some();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect("127.0.0.1:47000").unwrap();
    s.set_nonblocking(spin).unwrap();
    let msg = vec![7u8; size];
    let mut buf = vec![0u8; 65536];
    let mut rtts = Vec::new();
    for i in 0..n + 1000 {
        let t = Instant::now();
        s.send(&msg).unwrap();
        loop {
            match s.recv(&mut buf) {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        }
        if i >= 1000 {
            rtts.push(t.elapsed().as_nanos() as f64 / 1000.0);
        }
    }
    rtts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let avg: f64 = rtts.iter().sum::<f64>() / rtts.len() as f64;
    println!("udp size {size} spin {spin}: min {:.1} p50 {:.1} avg {:.1} p99 {:.1} max {:.1} us", rtts[0], rtts[rtts.len() / 2], avg, rtts[rtts.len() * 99 / 100], rtts[rtts.len() - 1]);
}
