//! The HTTP side: answers each route from the state directory and the control socket.
use crate::auth;
use crate::routes::{self, Route, ASSETS};
use partita_supervisor::control_socket::{self, Request, SOCKET};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Options {
    pub listen: SocketAddr,
    pub state_dir: PathBuf,
    /// The admin token; `None`: admin actions are refused (403).
    pub token: Option<String>,
}

/// At most this many requests are served at once (event streams included); more get 503.
const MAX_IN_FLIGHT: usize = 64;
/// The most events one `/events` answer holds (the last ones from `since` on).
const MAX_EVENTS: usize = 500;
/// The largest request body read (admin requests are a short JSON object).
const MAX_BODY: u64 = 4096;
/// How long an admin action may take at the supervisor.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(15);

const PAGE: &str = include_str!("../assets/index.html");

fn asset(name: &str) -> &'static [u8] {
    match name {
        "app.js" => include_bytes!("../assets/app.js"),
        "app.css" => include_bytes!("../assets/app.css"),
        "vendor/uPlot.iife.min.js" => include_bytes!("../assets/vendor/uPlot.iife.min.js"),
        "vendor/uPlot.min.css" => include_bytes!("../assets/vendor/uPlot.min.css"),
        "vendor/uPlot.LICENSE" => include_bytes!("../assets/vendor/uPlot.LICENSE"),
        _ => b"",
    }
}

pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

/// What a handler answers (event streams write their own answer).
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub extra: Vec<(&'static str, String)>,
}

impl Reply {
    fn json(status: u16, v: &Value) -> Reply {
        Reply { status, content_type: "application/json", body: v.to_string().into_bytes(), extra: Vec::new() }
    }
    fn error(status: u16, msg: impl Into<String>) -> Reply {
        Reply::json(status, &json!({ "error": msg.into() }))
    }
}

const COMMON_HEADERS: &[(&str, &str)] = &[
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy", CSP),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
];

/// Serves until the process is stopped. Errors: the address could not be bound.
pub fn serve(opts: Options) -> Result<(), String> {
    auth::check_listen(&opts.listen, opts.token.is_some())?;
    let server = tiny_http::Server::http(opts.listen).map_err(|e| format!("--listen {}: {e}", opts.listen))?;
    eprintln!(
        "partita web: serving {} on http://{}/ (admin actions {})",
        opts.state_dir.display(),
        opts.listen,
        if opts.token.is_some() { "need the token" } else { "off: no token" }
    );
    let shared = Arc::new(Shared { state_dir: opts.state_dir, token: opts.token, loopback: opts.listen.ip().is_loopback() });
    let in_flight = Arc::new(AtomicUsize::new(0));
    for request in server.incoming_requests() {
        if in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
            in_flight.fetch_sub(1, Ordering::SeqCst);
            respond(request, Reply::error(503, "too many requests at once; try again"));
            continue;
        }
        let (shared, count) = (shared.clone(), in_flight.clone());
        let spawned = std::thread::Builder::new().name("web-request".into()).spawn(move || {
            handle(&shared, request);
            count.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

pub struct Shared {
    pub state_dir: PathBuf,
    pub token: Option<String>,
    pub loopback: bool,
}

fn header<'a>(request: &'a tiny_http::Request, name: &str) -> Option<&'a str> {
    request.headers().iter().find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name)).map(|h| h.value.as_str())
}

/// On a loopback listener only loopback host names are served: a page elsewhere that points its own name at
/// 127.0.0.1 (DNS rebinding) gets nothing.
pub fn host_allowed(host: Option<&str>) -> bool {
    let Some(host) = host else { return true };
    let name = if host.starts_with('[') {
        host.split_once(']').map(|(h, _)| &h[1..]).unwrap_or(host)
    } else {
        host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false)
}

fn handle(shared: &Shared, mut request: tiny_http::Request) {
    if shared.loopback && !host_allowed(header(&request, "Host")) {
        return respond(request, Reply::error(421, "this view answers only to localhost and loopback addresses"));
    }
    let method = request.method().as_str().to_string();
    let target = request.url().to_string();
    let (path, query) = routes::split_target(&target);
    let route = match routes::route(&method, path) {
        Ok(r) => r,
        Err(e) => {
            let mut reply = Reply::error(e.status, e.error);
            if !e.allow.is_empty() {
                reply.extra.push(("Allow", e.allow.into()));
            }
            return respond(request, reply);
        }
    };
    let reply = match route {
        Route::Page => Reply { status: 200, content_type: "text/html; charset=utf-8", body: PAGE.as_bytes().to_vec(), extra: Vec::new() },
        Route::Asset(a) => {
            let ct = ASSETS.iter().find(|(n, _)| *n == a).map(|(_, c)| *c).unwrap_or("application/octet-stream");
            Reply { status: 200, content_type: ct, body: asset(a).to_vec(), extra: Vec::new() }
        }
        Route::Systems => Reply::json(200, &systems(&shared.state_dir)),
        Route::System(s) => match read_state(&shared.state_dir, &s) {
            Ok(bytes) => Reply { status: 200, content_type: "application/json", body: bytes, extra: Vec::new() },
            Err(r) => r,
        },
        Route::Events(s) => {
            let since = routes::query_value(query, "since").and_then(|v| v.parse().ok()).unwrap_or(0);
            match system_dir(&shared.state_dir, &s) {
                Ok(dir) => Reply::json(200, &events(&dir, since)),
                Err(r) => r,
            }
        }
        Route::Stream(s) => match system_dir(&shared.state_dir, &s) {
            Ok(dir) => {
                let since = routes::query_value(query, "since").and_then(|v| v.parse().ok());
                return stream(request, &dir, since);
            }
            Err(r) => r,
        },
        Route::Restart { system, partition } => {
            let cold = matches!(routes::query_value(query, "cold"), Some("1" | "true" | ""));
            admin(shared, &request, &system, || Ok(Request::RestartPartition { partition, cold }))
        }
        Route::Monitors(s) => match system_dir(&shared.state_dir, &s) {
            Ok(dir) => Reply::json(200, &crate::monitors::monitors(&dir)),
            Err(r) => r,
        },
        Route::Frame { system, node } => match system_dir(&shared.state_dir, &system) {
            Ok(dir) => match crate::monitors::frame(&dir, &node) {
                Some(png) => Reply { status: 200, content_type: "image/png", body: png, extra: Vec::new() },
                None => Reply::error(404, format!("no frame of {node:?} (a monitor saves one with --save-frame <state dir>/{node}.frame.png --live-frame)")),
            },
            Err(r) => r,
        },
        Route::Stop { system, partition } => admin(shared, &request, &system, || Ok(Request::StopPartition { partition })),
        Route::ReloadRouters(system) => admin(shared, &request, &system, || Ok(Request::ReloadRouters)),
        Route::Plan(system) => {
            let mut body = String::new();
            let read = request.as_reader().take(MAX_BODY).read_to_string(&mut body);
            admin(shared, &request, &system, || {
                read.map_err(|e| format!("the request body: {e}"))?;
                plan_request(&body)
            })
        }
    };
    let head = method == "HEAD";
    let mut reply = reply;
    if head {
        reply.body.clear();
    }
    respond(request, reply)
}

/// The switch a `POST .../plan` body asks for: `{"plan": NAME, "module": NAME (optional), "now": bool (optional)}`.
pub fn plan_request(body: &str) -> Result<Request, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON ({e}); send {{\"plan\": \"NAME\", \"module\": \"NAME\" (optional), \"now\": false}}"))?;
    let obj = v.as_object().ok_or("the body must be a JSON object: {\"plan\": \"NAME\"}")?;
    if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "plan" | "module" | "now")) {
        return Err(format!("unknown field {k:?} in the body; the fields are plan, module and now"));
    }
    let plan = obj.get("plan").and_then(Value::as_str).ok_or("the body's field \"plan\" (a string, the plan's name) is missing")?;
    if !routes::valid_name(plan) {
        return Err(format!("\"plan\": {plan:?} is not a name (A-Z a-z 0-9 . _ -)"));
    }
    let module = match obj.get("module") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if routes::valid_name(m) => Some(m.clone()),
        Some(m) => return Err(format!("\"module\": {m} is not a module's name (A-Z a-z 0-9 . _ -)")),
    };
    let now = match obj.get("now") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(n) => return Err(format!("\"now\": {n} must be true or false")),
    };
    Ok(Request::SwitchPlan { module, plan: plan.to_string(), now })
}

fn respond(request: tiny_http::Request, reply: Reply) {
    let mut response = tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
    let mut add = |k: &str, v: &str| {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            response.add_header(h);
        }
    };
    add("Content-Type", reply.content_type);
    for (k, v) in COMMON_HEADERS {
        add(k, v);
    }
    for (k, v) in &reply.extra {
        add(k, v);
    }
    let _ = request.respond(response);
}

/// The state directory of system `name`, which must have a state file.
fn system_dir(root: &Path, name: &str) -> Result<PathBuf, Reply> {
    if !routes::valid_name(name) {
        return Err(Reply::error(404, format!("{name:?} is not a system's name")));
    }
    let dir = root.join(name);
    if dir.join("state.json").is_file() {
        Ok(dir)
    } else {
        Err(Reply::error(404, format!("no system {name:?} is up here (no {})", dir.join("state.json").display())))
    }
}

fn read_state(root: &Path, name: &str) -> Result<Vec<u8>, Reply> {
    let dir = system_dir(root, name)?;
    let path = dir.join("state.json");
    std::fs::read(&path).map_err(|e| Reply::error(404, format!("{}: {e}", path.display())))
}

/// Every system with a state file: name, supervisor pid, whether the supervisor lives, when the state was written.
pub fn systems(root: &Path) -> Value {
    let mut states = partita_supervisor::supervisor::read_states(root);
    states.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (path, state) in states {
        let Some(name) = path.parent().and_then(Path::file_name).and_then(|n| n.to_str()).filter(|n| routes::valid_name(n)) else { continue };
        let pid = state["supervisor_pid"].as_i64().unwrap_or(0);
        out.push(json!({
            "name": name,
            "supervisor_pid": pid,
            "alive": pid > 0 && pid <= i32::MAX as i64 && partita_os::process::is_alive(pid as i32),
            "updated_unix_ms": state["updated_unix_ms"],
        }));
    }
    Value::Array(out)
}

/// Lines `since..` of `events.jsonl` (at most the last [`MAX_EVENTS`] of them), each with its `index`, and the
/// index to ask from next time.
pub fn events(dir: &Path, since: usize) -> Value {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    // Only whole lines: one being appended now comes next time.
    let complete = text.rfind('\n').map(|i| &text[..=i]).unwrap_or("");
    let lines: Vec<&str> = complete.lines().collect();
    let total = lines.len();
    let first = since.min(total).max(total.saturating_sub(MAX_EVENTS));
    let events: Vec<Value> = lines[first..]
        .iter()
        .enumerate()
        .map(|(k, l)| with_index(l, first + k))
        .collect();
    json!({ "events": events, "first": first, "next": total, "skipped": first - since.min(total) })
}

fn with_index(line: &str, index: usize) -> Value {
    let mut v = serde_json::from_str::<Value>(line).unwrap_or_else(|_| json!({ "event": "unreadable", "detail": line }));
    if let Some(o) = v.as_object_mut() {
        o.insert("index".into(), json!(index));
    }
    v
}

/// `GET .../stream`: server-sent events until the client goes or the system's state disappears: `state` (the
/// state file) at once and then every second, `event` for each health event appended (from line `since` on, or
/// from the end of the file now).
fn stream(request: tiny_http::Request, dir: &Path, since: Option<usize>) {
    let mut out = request.into_writer();
    let mut head = String::from("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n");
    for (k, v) in COMMON_HEADERS {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n: partita web\n\nretry: 1000\n\n");
    if out.write_all(head.as_bytes()).and_then(|_| out.flush()).is_err() {
        return;
    }
    let events_path = dir.join("events.jsonl");
    let state_path = dir.join("state.json");
    // Where in the event file the next event starts: a byte offset and its line index.
    let (mut offset, mut index) = match since {
        None => {
            let text = std::fs::read(&events_path).unwrap_or_default();
            let end = text.iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
            (end as u64, text[..end].iter().filter(|&&b| b == b'\n').count())
        }
        Some(_) => (0, 0),
    };
    let skip_to = since.unwrap_or(0);
    let mut last_state = Instant::now() - Duration::from_secs(10);
    loop {
        let mut msg = String::new();
        if last_state.elapsed() >= Duration::from_millis(1000) {
            match std::fs::read_to_string(&state_path) {
                Ok(text) => {
                    // One line of data: the state file is pretty-printed or not; JSON needs no newlines.
                    let compact = serde_json::from_str::<Value>(&text).map(|v| v.to_string()).unwrap_or_default();
                    if !compact.is_empty() {
                        msg.push_str(&format!("event: state\ndata: {compact}\n\n"));
                    }
                }
                Err(_) => {
                    let _ = out.write_all(b"event: gone\ndata: {}\n\n").and_then(|_| out.flush());
                    return;
                }
            }
            last_state = Instant::now();
        }
        if let Ok(mut f) = std::fs::File::open(&events_path) {
            use std::io::Seek;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len < offset {
                // The file was replaced (the system came up again under the same name): from its start.
                (offset, index) = (0, 0);
            }
            if len > offset && f.seek(std::io::SeekFrom::Start(offset)).is_ok() {
                let mut buf = Vec::new();
                let _ = f.take(1 << 20).read_to_end(&mut buf);
                let end = buf.iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
                for line in String::from_utf8_lossy(&buf[..end]).lines() {
                    if index >= skip_to {
                        msg.push_str(&format!("event: event\nid: {index}\ndata: {}\n\n", with_index(line, index)));
                    }
                    index += 1;
                }
                offset += end as u64;
            }
        }
        if !msg.is_empty() && out.write_all(msg.as_bytes()).and_then(|_| out.flush()).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An admin action: the token checked, then the request sent to the system's supervisor.
fn admin(shared: &Shared, request: &tiny_http::Request, system: &str, make: impl FnOnce() -> Result<Request, String>) -> Reply {
    let Some(token) = &shared.token else {
        return Reply::error(403, format!(
            "admin actions are off: no token is set; fix: make one with `partita web --new-token` (writes {}, mode 0600) and restart `partita web`, or name one with --token-file",
            auth::DEFAULT_TOKEN_FILE
        ));
    };
    let given = header(request, "Authorization").and_then(auth::bearer);
    match given {
        Some(g) if auth::constant_time_eq(g.as_bytes(), token.as_bytes()) => {}
        Some(_) => return Reply::error(403, "the token is wrong"),
        None => {
            let mut r = Reply::error(401, "admin actions need the header `Authorization: Bearer <token>` (the token is in partita web's token file)");
            r.extra.push(("WWW-Authenticate", "Bearer".into()));
            return r;
        }
    }
    let dir = match system_dir(&shared.state_dir, system) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let req = match make() {
        Ok(r) => r,
        Err(e) => return Reply::error(400, e),
    };
    if !dir.join(SOCKET).exists() {
        return Reply::error(409, format!("system {system:?} has no control socket ({}): its supervisor is not running", dir.join(SOCKET).display()));
    }
    match control_socket::send(&dir, &req, CONTROL_TIMEOUT) {
        Ok(r) if r.ok => Reply::json(200, &json!({ "ok": true, "detail": r.detail })),
        Ok(r) => Reply::json(409, &json!({ "ok": false, "error": r.detail })),
        Err(e) => Reply::error(502, format!("the supervisor of {system:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_bodies_are_checked() {
        assert_eq!(
            plan_request(r#"{"plan":"degraded"}"#),
            Ok(Request::SwitchPlan { module: None, plan: "degraded".into(), now: false })
        );
        assert_eq!(
            plan_request(r#"{"plan":"normal","module":"camera-node","now":true}"#),
            Ok(Request::SwitchPlan { module: Some("camera-node".into()), plan: "normal".into(), now: true })
        );
        assert!(plan_request("").unwrap_err().contains("not JSON"));
        assert!(plan_request("[]").unwrap_err().contains("object"));
        assert!(plan_request(r#"{"plan":"../x"}"#).unwrap_err().contains("not a name"));
        assert!(plan_request(r#"{"plan":"a","when":1}"#).unwrap_err().contains("\"when\""));
        assert!(plan_request(r#"{"plan":"a","now":"yes"}"#).unwrap_err().contains("true or false"));
        assert!(plan_request(r#"{}"#).unwrap_err().contains("missing"));
    }

    #[test]
    fn only_loopback_hosts_on_a_loopback_listener() {
        for ok in [None, Some("localhost"), Some("localhost:8080"), Some("127.0.0.1:1"), Some("[::1]:80"), Some("[::1]")] {
            assert!(host_allowed(ok), "{ok:?}");
        }
        for bad in ["evil.example:8080", "evil.example", "198.18.0.1:80", "[2001:db8::1]:80"] {
            assert!(!host_allowed(Some(bad)), "{bad}");
        }
    }

    #[test]
    fn events_come_from_an_index_bounded_and_whole_lines_only() {
        let dir = std::env::temp_dir().join(format!("partita-web-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        for k in 0..600 {
            text.push_str(&format!("{{\"partition\":\"p\",\"event\":\"start\",\"pid\":{k}}}\n"));
        }
        text.push_str("{\"partial");
        std::fs::write(dir.join("events.jsonl"), &text).unwrap();
        let all = events(&dir, 0);
        assert_eq!(all["next"], 600);
        assert_eq!(all["first"], 100);
        assert_eq!(all["skipped"], 100);
        assert_eq!(all["events"].as_array().unwrap().len(), 500);
        assert_eq!(all["events"][0]["index"], 100);
        assert_eq!(all["events"][0]["pid"], 100);
        let late = events(&dir, 598);
        assert_eq!(late["events"].as_array().unwrap().len(), 2);
        assert_eq!(late["events"][1]["pid"], 599);
        assert_eq!(events(&dir, 10_000)["events"].as_array().unwrap().len(), 0);
        assert_eq!(events(&dir.join("none"), 0)["next"], 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn systems_lists_state_files_and_skips_the_rest() {
        let root = std::env::temp_dir().join(format!("partita-web-systems-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("alive")).unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::create_dir_all(root.join("bad json")).unwrap();
        let me = std::process::id();
        std::fs::write(root.join("alive/state.json"), format!("{{\"system\":\"alive\",\"supervisor_pid\":{me},\"updated_unix_ms\":5}}")).unwrap();
        std::fs::write(root.join("bad json/state.json"), "{}").unwrap();
        let v = systems(&root);
        assert_eq!(v, json!([{ "name": "alive", "supervisor_pid": me, "alive": true, "updated_unix_ms": 5 }]));
        assert!(system_dir(&root, "empty").is_err());
        assert!(system_dir(&root, "..").is_err());
        assert!(read_state(&root, "alive").is_ok());
        let _ = std::fs::remove_dir_all(&root);
    }
}
