//! `fleetform controlplane`: run an embedded Kubernetes-compatible API server until SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use fleetform_controlplane::ControlPlane;

use super::exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory holding the server's SQLite database; without it, state lives in memory and is
    /// gone when the server stops.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address to serve on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Write a kubeconfig for the server here (mode 0600), for kubectl and fleetform.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
}

pub async fn run(args: Args) -> u8 {
    let running = match ControlPlane::builder()
        .data_dir(args.data_dir.clone())
        .listen(args.listen)
        .start()
        .await
    {
        Ok(running) => running,
        Err(err) => {
            eprintln!("error: {err}");
            return exit::INVALID_INPUT;
        }
    };
    if let Some(path) = &args.kubeconfig_out
        && let Err(err) = write_private(path, &running.kubeconfig())
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

/// Writes a file only its owner can read, for credentials.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents.as_bytes())
}
