//! `partita web`: the browser view of the systems up on this machine (crates/web serves it).
use clap::Args;
use partita_supervisor::supervisor::STATE_DIR;
use partita_web::auth::{load_token, new_token, DEFAULT_TOKEN_FILE};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct WebArgs {
    /// Where to listen; a non-loopback address only with an admin token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// The admin token's file (root's, mode 0600); admin actions are off without one.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Where the supervisors write their state.
    #[arg(long, default_value = STATE_DIR)]
    state_dir: PathBuf,
    /// Make a new random token, write it to the token file (mode 0600) and print it; then end.
    #[arg(long)]
    new_token: bool,
}

pub fn run(a: WebArgs) -> ExitCode {
    let token_file = a.token_file.unwrap_or_else(|| PathBuf::from(DEFAULT_TOKEN_FILE));
    if a.new_token {
        return match new_token(&token_file) {
            Ok(t) => {
                eprintln!("partita web: wrote a new token to {} (mode 0600); restart `partita web` to use it", token_file.display());
                println!("{t}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("partita web: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let listen: SocketAddr = match a.listen.parse() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("partita web: --listen {:?}: {e}; give an address and port, e.g. 127.0.0.1:8080", a.listen);
            return ExitCode::from(2);
        }
    };
    // No token file: admin actions are off (the page says how to turn them on); a bad one is an error.
    let token = load_token(&token_file, false);
    if let Ok(None) = token {
        eprintln!("partita web: no token file {}: admin actions are off; make one with `partita web --new-token{}`", token_file.display(),
            if token_file == std::path::Path::new(DEFAULT_TOKEN_FILE) { String::new() } else { format!(" --token-file {}", token_file.display()) });
    }
    // The loopback rule first: a non-loopback address without a usable token is refused for that reason.
    if let Err(e) = partita_web::auth::check_listen(&listen, matches!(token, Ok(Some(_)))) {
        eprintln!("partita web: {e}");
        if let Err(t) = &token {
            eprintln!("partita web: and the token file: {t}");
        }
        return ExitCode::from(2);
    }
    let token = match token {
        Ok(t) => t,
        Err(e) => {
            eprintln!("partita web: {e}");
            return ExitCode::from(2);
        }
    };
    match partita_web::serve(partita_web::Options { listen, state_dir: a.state_dir, token }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partita web: {e}");
            ExitCode::FAILURE
        }
    }
}
