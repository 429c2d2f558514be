//! `fleetform controlplane`: run an embedded Kubernetes-compatible API server until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory holding the server's SQLite database; without it, state lives in memory and is
    /// gone when the server stops. Created owner-only (0700, files 0600); one that group or
    /// others may read is refused.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address to serve on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Write a kubeconfig for the server here (mode 0600), for kubectl and fleetform: it
    /// trusts the server's CA and authenticates as an administrator (group system:masters).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Bearer tokens in kube-apiserver's --token-auth-file CSV format (token,user,uid,"groups").
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// Serve plain HTTP with no authentication (every client is an administrator); refused
    /// unless --listen is a loopback address.
    #[arg(long)]
    insecure_http: bool,
}

pub async fn run(args: Args) -> u8 {
    let mut builder = crate::embedded::builder()
        .data_dir(args.data_dir.clone())
        .listen(args.listen);
    if args.insecure_http {
        if !args.listen.ip().is_loopback() {
            eprintln!(
                "error: --insecure-http serves without authentication, so only on a loopback address; --listen {} is not one",
                args.listen
            );
            return exit::INVALID_INPUT;
        }
        if args.token_auth_file.is_some() {
            eprintln!("error: --token-auth-file needs TLS; drop --insecure-http");
            return exit::INVALID_INPUT;
        }
        builder = builder.insecure_http();
    } else if let Some(tokens) = &args.token_auth_file {
        builder = builder.token_auth_file(tokens.clone());
    }
    let running = match builder.start().await {
        Ok(running) => running,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::INVALID_INPUT;
        }
    };
    if let Some(path) = &args.kubeconfig_out
        && let Err(err) = super::write_private(path, &running.kubeconfig())
    {
        eprintln!("error: cannot write kubeconfig {}: {err}", path.display());
        running.shutdown().await;
        return exit::INTERNAL;
    }
    let storage = match &args.data_dir {
        Some(dir) => format!("data in {}", dir.display()),
        None => "data in memory".to_string(),
    };
    println!("control plane serving at {} ({storage})", running.url());
    if let Some(path) = &args.kubeconfig_out {
        println!("kubeconfig: {}", path.display());
    }
    super::shutdown_signal().await;
    println!("shutting down: finishing in-flight requests and closing watches");
    running.shutdown().await;
    exit::OK
}
