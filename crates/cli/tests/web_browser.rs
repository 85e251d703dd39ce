//! The web view in a browser (root; Python Playwright and Debian's Chromium from scripts/setup.sh): the page
//! lists the paper's system's partitions, its timeline advances, and when the routing partition's root process
//! is killed the page shows the health event and the restart within 2 s, with no console error
//! (crates/web/tests/browser.py). The screenshot goes to target/results/web/.
mod common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn python() -> PathBuf {
    let p = std::env::var_os("PARTITA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python"));
    assert!(p.exists(), "{} not found: run scripts/setup.sh", p.display());
    p
}



#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_page_shows_the_system_live_and_a_crash_and_restart_of_routing() {
    let python = python();
    let dir = TempDir::new("web", "browser");
    let name = format!("vb{}", std::process::id() % 100_000);
    // The paper's system with its status node, so that the routing partition's statistics are on the page too.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance-status.toml")).unwrap();
    let text = text.replace("name = \"video-surveillance\"", &format!("name = \"{name}\"")).replace("\"--system\", \"video-surveillance\"", &format!("\"--system\", \"{name}\"")).replace("/run/partita/video-surveillance/", &format!("/run/partita/{name}/"));
    assert!(text.contains(&name));
    let file = dir.0.join("vs.toml");
    std::fs::write(&file, text).unwrap();
    let err = dir.0.join("up.err");
    let up = spawn_up(&file, 120, &err);
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut web = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["web", "--listen", &format!("127.0.0.1:{port}"), "--token-file", dir.0.join("absent.token").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.0.join("web.err")).unwrap())
        .spawn()
        .unwrap();
    let results = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/results/web");
    std::fs::create_dir_all(&results).unwrap();
    let shot = results.join("web.png");
    let up_now = wait_for(Duration::from_secs(40), || {
        let s = state(&name);
        s["cpus"][0]["frames"].as_u64().unwrap_or(0) > 0
            && s["partitions"].as_array().map(|ps| ps.iter().all(|p| p["pid"].is_i64())).unwrap_or(false)
    });
    let mut outcome = Err(format!("the system did not come up: {}", std::fs::read_to_string(&err).unwrap_or_default()));
    if up_now {
        let mut browser = Command::new(&python)
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/tests/browser.py"))
            .args([&format!("http://127.0.0.1:{port}/"), &name, shot.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(browser.stdout.take().unwrap()).lines();
        let mut said = Vec::new();
        let mut ready = false;
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            said.push(line.clone());
            if line == "READY" {
                ready = true;
                break;
            }
        }
        if ready {
            // The routing partition's root process (the one its supervisor started), from the state.
            let pid = state(&name)["partitions"].as_array().and_then(|ps| ps.iter().find(|p| p["partition"] == "routing")).and_then(|p| p["pid"].as_i64()).unwrap_or(0);
            assert!(pid > 0, "routing has no pid in the state");
            partita_os::process::send_signal(pid as i32, libc::SIGKILL).unwrap();
            let _ = writeln!(browser.stdin.as_mut().unwrap(), "killed {pid}");
            said.extend(lines.map_while(Result::ok));
        }
        let status = browser.wait().unwrap();
        outcome = if status.success() { Ok(said.join("\n")) } else { Err(format!("{status}: {}", said.join("\n"))) };
    }
    // Our own child, by its pid.
    let _ = partita_os::process::send_signal(web.id() as i32, libc::SIGTERM);
    let _ = web.wait();
    let (status, up_err) = stop_up_when(up, &err, Duration::from_secs(1), || true);
    let _ = std::fs::remove_dir_all(Path::new("/run/partita").join(&name));
    let said = outcome.unwrap_or_else(|e| panic!("{e}\n{up_err}"));
    eprintln!("{said}\nscreenshot: {}", shot.display());
    assert!(status.success(), "{up_err}");
}
