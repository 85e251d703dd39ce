//! What a request asks for: its method and path mapped to a [`Route`], names checked before they reach the
//! file system.

/// Whether `name` may be a system's, partition's, module's or plan's name in a URL: 1 to 128 characters of
/// `[A-Za-z0-9._-]`, and not `.` or `..` (so it never leaves the state directory).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Page,
    Asset(&'static str),
    Systems,
    System(String),
    Events(String),
    Stream(String),
    Restart { system: String, partition: String },
    Stop { system: String, partition: String },
    Plan(String),
    /// `partita router reload`: the I/O partitions take over the system file's edited route tables.
    ReloadRouters(String),
    /// The monitoring nodes' live figures, from their logs.
    Monitors(String),
    /// A node's last saved frame (`<node>.frame.png` in the system's state directory).
    Frame { system: String, node: String },
}

/// Why a request has no route: the status (404, 405) and what to tell the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoRoute {
    pub status: u16,
    pub error: String,
    /// For 405: the methods the path allows.
    pub allow: &'static str,
}

fn not_found(what: String) -> NoRoute {
    NoRoute { status: 404, error: what, allow: "" }
}

/// The assets embedded in the binary: (path under /assets/, content type).
pub const ASSETS: &[(&str, &str)] = &[
    ("app.js", "text/javascript; charset=utf-8"),
    ("app.css", "text/css; charset=utf-8"),
    ("vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    ("vendor/uPlot.min.css", "text/css; charset=utf-8"),
    ("vendor/uPlot.LICENSE", "text/plain; charset=utf-8"),
];

/// Splits a request target into its path and query.
pub fn split_target(target: &str) -> (&str, &str) {
    target.split_once('?').unwrap_or((target, ""))
}

/// The value of `key` in a query string (no percent-decoding: the values partita reads are numbers and flags).
pub fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then_some(v)
    })
}

pub fn route(method: &str, path: &str) -> Result<Route, NoRoute> {
    let get = |r: Route| -> Result<Route, NoRoute> {
        if method == "GET" || method == "HEAD" {
            Ok(r)
        } else {
            Err(NoRoute { status: 405, error: format!("{method} {path}: only GET"), allow: "GET, HEAD" })
        }
    };
    let post = |r: Route| -> Result<Route, NoRoute> {
        if method == "POST" {
            Ok(r)
        } else {
            Err(NoRoute { status: 405, error: format!("{method} {path}: only POST"), allow: "POST" })
        }
    };
    if path == "/" || path == "/index.html" {
        return get(Route::Page);
    }
    if let Some(asset) = path.strip_prefix("/assets/") {
        return match ASSETS.iter().find(|(a, _)| *a == asset) {
            Some((a, _)) => get(Route::Asset(a)),
            None => Err(not_found(format!("no asset {path:?}"))),
        };
    }
    let Some(rest) = path.strip_prefix("/api/systems") else {
        return Err(not_found(format!("no page {path:?}; the view is at / and its API under /api/systems")));
    };
    if rest.is_empty() || rest == "/" {
        return get(Route::Systems);
    }
    let Some(rest) = rest.strip_prefix('/') else {
        return Err(not_found(format!("no page {path:?}")));
    };
    let parts: Vec<&str> = rest.split('/').collect();
    for p in &parts {
        if !valid_name(p) {
            return Err(not_found(format!(
                "{path:?}: {p:?} is not a name (names are made of A-Z a-z 0-9 . _ -)"
            )));
        }
    }
    let system = parts[0].to_string();
    match parts[1..] {
        [] => get(Route::System(system)),
        ["events"] => get(Route::Events(system)),
        ["stream"] => get(Route::Stream(system)),
        ["plan"] => post(Route::Plan(system)),
        ["routers", "reload"] => post(Route::ReloadRouters(system)),
        ["monitors"] => get(Route::Monitors(system)),
        ["frames", node] => get(Route::Frame { system, node: node.to_string() }),
        ["partitions", p, "restart"] => post(Route::Restart { system, partition: p.to_string() }),
        ["partitions", p, "stop"] => post(Route::Stop { system, partition: p.to_string() }),
        _ => Err(not_found(format!("no page {path:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        for ok in ["video-surveillance", "vs12345", "a.b_c-d", "routing"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "../etc", "a b", "a%2fb", "ä", "a\0b", &"x".repeat(129)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn paths_map_to_routes() {
        assert_eq!(route("GET", "/"), Ok(Route::Page));
        assert_eq!(route("GET", "/assets/app.js"), Ok(Route::Asset("app.js")));
        assert_eq!(route("GET", "/assets/vendor/uPlot.iife.min.js"), Ok(Route::Asset("vendor/uPlot.iife.min.js")));
        assert_eq!(route("GET", "/api/systems"), Ok(Route::Systems));
        assert_eq!(route("GET", "/api/systems/"), Ok(Route::Systems));
        assert_eq!(route("GET", "/api/systems/vs"), Ok(Route::System("vs".into())));
        assert_eq!(route("GET", "/api/systems/vs/events"), Ok(Route::Events("vs".into())));
        assert_eq!(route("GET", "/api/systems/vs/stream"), Ok(Route::Stream("vs".into())));
        assert_eq!(route("POST", "/api/systems/vs/plan"), Ok(Route::Plan("vs".into())));
        assert_eq!(route("POST", "/api/systems/vs/routers/reload"), Ok(Route::ReloadRouters("vs".into())));
        assert_eq!(route("GET", "/api/systems/vs/routers/reload").unwrap_err().status, 405);
        assert_eq!(
            route("POST", "/api/systems/vs/partitions/routing/restart"),
            Ok(Route::Restart { system: "vs".into(), partition: "routing".into() })
        );
        assert_eq!(
            route("POST", "/api/systems/vs/partitions/routing/stop"),
            Ok(Route::Stop { system: "vs".into(), partition: "routing".into() })
        );
    }

    #[test]
    fn bad_paths_are_404_and_wrong_methods_405() {
        for p in [
            "/nothing", "/assets/../Cargo.toml", "/assets/nope.js", "/api/systems/../../etc",
            "/api/systems/..", "/api/systems/vs/partitions/../stop", "/api/systems/vs/x",
            "/api/systems/vs/partitions/routing", "/api/systemsx", "/api/systems//", "/api/systems/vs/",
        ] {
            let e = route("GET", p).unwrap_err();
            assert_eq!(e.status, 404, "{p}: {e:?}");
        }
        assert_eq!(route("POST", "/").unwrap_err().status, 405);
        assert_eq!(route("DELETE", "/api/systems/vs").unwrap_err().status, 405);
        let e = route("GET", "/api/systems/vs/partitions/routing/restart").unwrap_err();
        assert_eq!((e.status, e.allow), (405, "POST"));
        assert_eq!(route("PUT", "/api/systems/vs/plan").unwrap_err().status, 405);
    }

    #[test]
    fn queries_give_their_values() {
        assert_eq!(split_target("/a?b=1&c"), ("/a", "b=1&c"));
        assert_eq!(query_value("since=12&cold=1", "since"), Some("12"));
        assert_eq!(query_value("since=12&cold", "cold"), Some(""));
        assert_eq!(query_value("since=12", "cold"), None);
    }
}
