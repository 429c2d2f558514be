//! The fleet repo a benchmark commits to and starts `up` from.

/// Commits the work tree of `repo` with `message`; returns the commit's id.
pub fn commit(repo: &git2::Repository, message: &str) -> Result<String, git2::Error> {
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let signature = git2::Signature::now("bench", "bench@example.com")?;
    let parent = repo.head().ok().and_then(|head| head.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    let id = repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        message,
        &tree,
        &parents,
    )?;
    Ok(id.to_string())
}

/// The fleet the files under `dir` declare, as `up` loads it.
pub fn load(dir: &std::path::Path) -> Result<fleetform::fleet::Fleet, String> {
    let (_, fleet) = fleetform::source::load_fleet(&fleetform::source::SourceSpec {
        location: dir.display().to_string(),
        ..Default::default()
    })
    .map_err(|err| format!("the fleet: {err:?}"))?;
    Ok(fleet)
}

/// How the `up` benchmarks start `up`: on the repo at `repo`, its data under `data`, syncing
/// every second, the hub on `hub_runtime`; `light` spokes keep their state in memory and their
/// agents run `light_loops`, the others are what `up` runs.
pub fn up_config(
    data: &std::path::Path,
    repo: &std::path::Path,
    light: bool,
    light_loops: fleetform::agent::AgentLoops,
    hub_runtime: tokio::runtime::Handle,
) -> fleetform::up::UpConfig {
    fleetform::up::UpConfig {
        interval: std::time::Duration::from_secs(1),
        spokes_in_memory: light,
        agent_loops: if light {
            light_loops
        } else {
            fleetform::agent::AgentLoops::All
        },
        hub_runtime: Some(hub_runtime),
        // `up` makes its data dir owner-only; a temporary directory is not.
        ..fleetform::up::UpConfig::new(data.join("up"), repo.display().to_string())
    }
}
