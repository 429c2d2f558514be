//! What a benchmark reads from `/proc` of its own process and of the processes it started:
//! resident set (now and at its peak), CPU time (of a whole process, and of its own threads by
//! the runtime a thread belongs to, told apart by thread name), load and machine. Each
//! benchmark uses what it reports.
#![allow(dead_code)]

/// A `/proc/<process>/status` field in KiB (`process`: a pid, or `self`); 0 when the process
/// is gone.
fn proc_status_kib(process: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

/// This process's resident set.
pub fn rss_mib() -> f64 {
    proc_status_kib("self", "VmRSS:") as f64 / 1024.0
}

/// The resident set of process `pid` (0 once it is gone).
pub fn process_rss_mib(pid: u32) -> f64 {
    proc_status_kib(&pid.to_string(), "VmRSS:") as f64 / 1024.0
}

/// The largest resident set process `pid` has had since it started (the kernel's high-water
/// mark, which catches a peak between two samples).
pub fn process_peak_rss_mib(pid: u32) -> f64 {
    proc_status_kib(&pid.to_string(), "VmHWM:") as f64 / 1024.0
}

/// CPU seconds (user + system) process `pid` has used so far, all its threads together.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_cpu_seconds(&stat).map(|(_, cpu)| cpu)
}

/// CPU seconds (user + system) of a `/proc/.../stat` line.
fn stat_cpu_seconds(stat: &str) -> Option<(String, f64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = stat.get(close + 2..)?.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on every Linux ABI.
    Some((comm, (utime + stime) / 100.0))
}

/// CPU seconds used so far: the whole process, the hub runtime's threads ("hub-rt"), the
/// fleet runtime's ("fleet-rt") and the control planes' SQLite writers ("controlplane-writer").
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTimes {
    pub process: f64,
    pub hub: f64,
    pub fleet: f64,
    pub writers: f64,
}

impl CpuTimes {
    /// What was used between `earlier` and these times.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            process: self.process - earlier.process,
            hub: self.hub - earlier.hub,
            fleet: self.fleet - earlier.fleet,
            writers: self.writers - earlier.writers,
        }
    }
}

pub fn cpu_times() -> CpuTimes {
    let process = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| stat_cpu_seconds(&stat))
        .map_or(0.0, |(_, cpu)| cpu);
    let mut times = CpuTimes {
        process,
        ..CpuTimes::default()
    };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return times;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let Some((comm, cpu)) = stat_cpu_seconds(&stat) else {
            continue;
        };
        // A thread's name is cut at 15 bytes.
        if comm.starts_with("hub-rt") {
            times.hub += cpu;
        } else if comm.starts_with("fleet-rt") {
            times.fleet += cpu;
        } else if comm.starts_with("controlplane-wr") {
            times.writers += cpu;
        }
    }
    times
}

/// The load averages over 1, 5 and 15 minutes.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The CPU's model and how many cores this process may use.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name")
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("{cpu}, {cores} cores")
}
