//! `partita web` against the paper's system (root): its API serves what `partita status --json` shows, admin
//! actions need the token (403 without one configured, 401/403 without the right one) and stop and restart the
//! routing partition through the supervisor; a non-loopback address without a token is refused. The server
//! listens on loopback only.
mod common;
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;



fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One HTTP/1.0 request to 127.0.0.1:port: (status, body).
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return (0, String::new()) };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn spawn_web(port: u16, token_file: &Path, err: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["web", "--listen", &format!("127.0.0.1:{port}"), "--token-file", token_file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap()
}

fn end(mut child: Child) {
    // Our own child, by its pid.
    let _ = partita_os::process::send_signal(child.id() as i32, libc::SIGTERM);
    let _ = child.wait();
}

fn partition<'a>(s: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    s["partitions"].as_array().and_then(|ps| ps.iter().find(|p| p["partition"] == name)).unwrap_or(&serde_json::Value::Null)
}

/// The fields of a state that do not change second to second.
fn stable(s: &serde_json::Value) -> serde_json::Value {
    let parts: Vec<serde_json::Value> = s["partitions"].as_array().cloned().unwrap_or_default().iter()
        .map(|p| serde_json::json!([p["partition"], p["module"], p["pid"], p["address"], p["external_address"]]))
        .collect();
    let cpus: Vec<serde_json::Value> = s["cpus"].as_array().cloned().unwrap_or_default().iter()
        .map(|c| serde_json::json!([c["module"], c["cpu"], c["plan"], c["major_frame_ns"], c["windows"], c["origin_ns"]]))
        .collect();
    serde_json::json!({ "system": s["system"], "supervisor_pid": s["supervisor_pid"], "started": s["started_unix_ms"],
        "partitions": parts, "plans": s["plans"], "cpus": cpus })
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused() {
    let dir = TempDir::new("web", "listen");
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["web", "--listen", "198.18.0.1:18080", "--token-file", dir.0.join("absent.token").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("198.18.0.1:18080") && err.contains("loopback") && err.contains("--new-token"), "{err}");
    // A token file others may read is refused, naming the file and the fix.
    let token = dir.0.join("open.token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["web", "--listen", &format!("127.0.0.1:{}", free_port()), "--token-file", token.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(token.to_str().unwrap()) && err.contains("chmod 600"), "{err}");
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn the_api_serves_the_state_and_admin_actions_need_the_token() {
    let dir = TempDir::new("web", "api");
    let name = format!("vw{}", std::process::id() % 100_000);
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance.toml")).unwrap();
    let text = text.replace("name = \"video-surveillance\"", &format!("name = \"{name}\""));
    assert!(text.contains(&name));
    let file = dir.0.join("vs.toml");
    std::fs::write(&file, text).unwrap();
    let err = dir.0.join("up.err");
    let up = spawn_up(&file, 90, &err);
    let token_file = dir.0.join("web.token");
    let made = Command::new(env!("CARGO_BIN_EXE_partita")).args(["web", "--new-token", "--token-file", token_file.to_str().unwrap()]).output().unwrap();
    assert!(made.status.success(), "{made:?}");
    let token = String::from_utf8_lossy(&made.stdout).trim().to_string();
    let (open_port, admin_port) = (free_port(), free_port());
    let web_open = spawn_web(open_port, &dir.0.join("absent.token"), &dir.0.join("web-open.err"));
    let web = spawn_web(admin_port, &token_file, &dir.0.join("web.err"));
    let mut failures: Vec<String> = Vec::new();
    let up_now = wait_for(Duration::from_secs(40), || {
        let s = state(&name);
        s["cpus"][0]["frames"].as_u64().unwrap_or(0) > 0
            && s["partitions"].as_array().map(|ps| ps.iter().all(|p| p["pid"].is_i64())).unwrap_or(false)
    });
    let served = wait_for(Duration::from_secs(10), || http(admin_port, "GET", "/api/systems", &[], "").0 == 200 && http(open_port, "GET", "/", &[], "").0 == 200);
    if !up_now || !served {
        failures.push(format!("the system ({up_now}) or the web view ({served}) did not come up: {}", std::fs::read_to_string(&err).unwrap_or_default()));
    } else {
        // The list, and one system's state as `partita status --json` shows it.
        let (code, list) = http(admin_port, "GET", "/api/systems", &[], "");
        let list: serde_json::Value = serde_json::from_str(&list).unwrap_or_default();
        let entry = list.as_array().and_then(|l| l.iter().find(|s| s["name"] == name.as_str()));
        if code != 200 || entry.map(|e| e["alive"] != true).unwrap_or(true) {
            failures.push(format!("/api/systems: {code} {list}"));
        }
        let status = Command::new(env!("CARGO_BIN_EXE_partita")).args(["status", "--json"]).output().unwrap();
        let (code, body) = http(admin_port, "GET", &format!("/api/systems/{name}"), &[], "");
        let all: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
        let from_status = all.as_array().and_then(|a| a.iter().find(|s| s["system"] == name.as_str())).cloned().unwrap_or_default();
        let from_web: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if code != 200 || stable(&from_web) != stable(&from_status) || from_web["cpus"][0]["windows"].as_array().map(|w| w.is_empty()).unwrap_or(true) {
            failures.push(format!("/api/systems/{name}: {code}\n{}\n!=\n{}", stable(&from_web), stable(&from_status)));
        }
        let (code, events) = http(admin_port, "GET", &format!("/api/systems/{name}/events?since=0"), &[], "");
        let events: serde_json::Value = serde_json::from_str(&events).unwrap_or_default();
        if code != 200 || !events["events"].as_array().map(|e| e.iter().any(|e| e["event"] == "start" && e["partition"] == "routing")).unwrap_or(false) {
            failures.push(format!("events: {code} {events}"));
        }
        for (path, want) in [("/api/systems/nosuch", 404), ("/api/systems/..", 404), ("/etc/passwd", 404), ("/assets/../../etc/passwd", 404)] {
            let (code, body) = http(admin_port, "GET", path, &[], "");
            if code != want || !body.contains("\"error\"") {
                failures.push(format!("GET {path}: {code} {body}, expected {want} with a JSON error"));
            }
        }
        let (code, _) = http(admin_port, "DELETE", &format!("/api/systems/{name}"), &[], "");
        if code != 405 {
            failures.push(format!("DELETE: {code}, expected 405"));
        }
        // From inside a partition (its network namespace: every process of it is there), the web view is out of
        // reach: its loopback is its own, and no address it can reach is the host's.
        let ns = format!("partita-{name}-recorder");
        let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{admin_port} && printf 'GET /api/systems HTTP/1.0\\r\\n\\r\\n' >&3 && head -c 200 <&3");
        let tried = Command::new("ip").args(["netns", "exec", &ns, "timeout", "5", "bash", "-c", &probe]).output().unwrap();
        if tried.status.success() || String::from_utf8_lossy(&tried.stdout).contains("HTTP/") {
            failures.push(format!("a partition's namespace reached the web view: {tried:?}"));
        }
        if !Command::new("ip").args(["netns", "exec", &ns, "true"]).status().unwrap().success() {
            failures.push(format!("no namespace {ns} to attack from"));
        }
        // Admin actions: none without a token configured, none without the right one.
        let stop = format!("/api/systems/{name}/partitions/routing/stop");
        let (code, body) = http(open_port, "POST", &stop, &[("Authorization", &format!("Bearer {token}"))], "");
        if code != 403 || !body.contains("--new-token") {
            failures.push(format!("admin with no token configured: {code} {body}"));
        }
        let (code, _) = http(admin_port, "POST", &stop, &[], "");
        if code != 401 {
            failures.push(format!("admin without a token: {code}, expected 401"));
        }
        let (code, _) = http(admin_port, "POST", &stop, &[("Authorization", "Bearer 0123456789abcdef0123456789abcdef")], "");
        if code != 403 {
            failures.push(format!("admin with a wrong token: {code}, expected 403"));
        }
        if partition(&state(&name), "routing")["pid"].is_null() {
            failures.push("a refused stop stopped routing".into());
        }
        // The right token: stop routing, see it stopped, restart it.
        let auth = format!("Bearer {token}");
        let restarts = partition(&state(&name), "routing")["restarts"].as_u64().unwrap_or(0);
        let (code, body) = http(admin_port, "POST", &stop, &[("Authorization", &auth)], "");
        if code != 200 {
            failures.push(format!("stop: {code} {body}"));
        }
        if !wait_for(Duration::from_secs(5), || partition(&state(&name), "routing")["pid"].is_null()) {
            failures.push(format!("routing is not shown stopped: {}", partition(&state(&name), "routing")));
        }
        let (code, body) = http(admin_port, "POST", &format!("/api/systems/{name}/partitions/routing/restart"), &[("Authorization", &auth)], "");
        if code != 200 {
            failures.push(format!("restart: {code} {body}"));
        }
        if !wait_for(Duration::from_secs(10), || {
            let p = partition(&state(&name), "routing").clone();
            p["pid"].is_i64() && p["restarts"].as_u64() == Some(restarts + 1)
        }) {
            failures.push(format!("routing did not come back with one more restart: {}", partition(&state(&name), "routing")));
        }
        // The route tables again, through the same socket: without a token refused; with it the supervisor reads
        // the file it runs from and finds no table changed.
        let reload = format!("/api/systems/{name}/routers/reload");
        let (code, _) = http(admin_port, "POST", &reload, &[], "");
        if code != 401 {
            failures.push(format!("router reload without a token: {code}, expected 401"));
        }
        let (code, body) = http(admin_port, "POST", &reload, &[("Authorization", &auth)], "");
        if code != 200 || !body.contains("no route table changed") {
            failures.push(format!("router reload: {code} {body}"));
        }
        // A plan the module does not have (the paper's module has one): the supervisor's refusal comes back.
        let (code, body) = http(admin_port, "POST", &format!("/api/systems/{name}/plan"), &[("Authorization", &auth)], r#"{"plan":"nosuch"}"#);
        if code != 409 || !body.contains("\"ok\":false") || !body.contains("plan") {
            failures.push(format!("switch to a plan that does not exist: {code} {body}"));
        }
        let (code, body) = http(admin_port, "POST", &format!("/api/systems/{name}/plan"), &[("Authorization", &auth)], r#"{"plan":"../x"}"#);
        if code != 400 {
            failures.push(format!("a bad plan name: {code} {body}"));
        }
    }
    end(web);
    end(web_open);
    let (status, up_err) = stop_up_when(up, &err, Duration::from_secs(1), || true);
    let _ = std::fs::remove_dir_all(Path::new("/run/partita").join(&name));
    assert!(failures.is_empty(), "{failures:#?}\n{up_err}");
    assert!(status.success(), "{up_err}");
}
