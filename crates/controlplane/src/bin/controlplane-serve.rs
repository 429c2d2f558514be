//! A minimal runner for the control plane, used by the crash tests and for manual poking:
//! `controlplane-serve [--data-dir DIR] [--listen ADDR]`. Prints `listening on URL` once
//! serving, and stops gracefully on SIGTERM or Ctrl-C. It serves plain HTTP with no
//! authentication, so it refuses non-loopback addresses. (The product command is
//! `fleetform controlplane`.)

use std::net::SocketAddr;
use std::path::PathBuf;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut data_dir = None;
    let mut listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--data-dir", Some(d)) => data_dir = Some(PathBuf::from(d)),
            ("--listen", Some(l)) => match l.parse() {
                Ok(addr) => listen = addr,
                Err(e) => {
                    eprintln!("--listen {l}: {e}");
                    return std::process::ExitCode::from(2);
                }
            },
            _ => {
                eprintln!("usage: controlplane-serve [--data-dir DIR] [--listen ADDR]");
                return std::process::ExitCode::from(2);
            }
        }
    }
    if !listen.ip().is_loopback() {
        eprintln!("--listen {listen}: controlplane-serve serves plain HTTP, so only on loopback");
        return std::process::ExitCode::from(2);
    }
    let signal = async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
        tokio::select! {
            _ = term.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
    };
    let result = fleetform_controlplane::ControlPlane::builder()
        .data_dir(data_dir)
        .listen(listen)
        .insecure_http()
        .run_until(signal, |cp| {
            println!("listening on {}", cp.url());
        })
        .await;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
