//! Plans for people — terminal text (coloured when asked) and Markdown for a pull-request
//! comment — and for programs: the versioned plan document that `plan -o json|yaml` prints and
//! `plan --out` saves for `apply`.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use serde_json::Value;

use super::rollout::{RolloutPlan, SpokeChange};
use super::{Action, Counts, HubPlan, ManagingSync, ObjectChange, Plan};
use crate::api::fleet::OfflinePolicy;
use crate::source::Origin;

/// The version of the plan document's format. It changes when a field changes meaning or goes
/// away (new fields may appear without a change); `apply` refuses a saved plan of another one.
pub const FORMAT_VERSION: &str = "1";

/// A plan as a document for programs: the plan itself with its format version and counts, for
/// the whole fleet (`summary`) and for each hub (`hubs[].summary`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Document<'a> {
    format_version: &'static str,
    summary: Counts,
    source: &'a Origin,
    hubs: Vec<HubDocument<'a>>,
}

#[derive(Serialize)]
struct HubDocument<'a> {
    #[serde(flatten)]
    plan: &'a HubPlan,
    summary: Counts,
}

/// The plan as a document (see [`Document`]).
pub fn document(plan: &Plan) -> Document<'_> {
    Document {
        format_version: FORMAT_VERSION,
        summary: plan.counts(),
        source: &plan.source,
        hubs: plan
            .hubs
            .iter()
            .map(|hub| HubDocument {
                plan: hub,
                summary: hub.counts(),
            })
            .collect(),
    }
}

/// Why a saved plan document cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("not a plan document: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("plan format {found}, but this fleetform reads format {FORMAT_VERSION}: plan again")]
    OtherFormat { found: String },
}

/// Reads a plan document saved as JSON, refusing other format versions.
pub fn read_document(json: &[u8]) -> Result<Plan, DocumentError> {
    let document: Value = serde_json::from_slice(json)?;
    let found = match document.get("formatVersion") {
        Some(Value::String(version)) => version.clone(),
        Some(other) => other.to_string(),
        None => "(none)".to_string(),
    };
    if found != FORMAT_VERSION {
        return Err(DocumentError::OtherFormat { found });
    }
    Ok(serde_json::from_value(document)?)
}

/// Diffs longer than this are folded in Markdown.
const FOLD_LINES: usize = 30;

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

fn symbol(action: Action) -> (&'static str, &'static str, &'static str) {
    match action {
        Action::Create => ("+", "create", GREEN),
        Action::Update => ("~", "update", YELLOW),
        Action::Delete => ("-", "delete", RED),
    }
}

/// The plan as terminal text; `colour` adds ANSI colours (only on a terminal, never with
/// `NO_COLOR`: the caller decides).
pub fn text(plan: &Plan, colour: bool) -> String {
    let paint = |code: &str, text: &str| {
        if colour {
            format!("{code}{text}{RESET}")
        } else {
            text.to_string()
        }
    };
    let mut out = String::new();
    let _ = writeln!(out, "source: {}", plan.source);
    for hub in &plan.hubs {
        if is_empty(hub) {
            continue;
        }
        let _ = writeln!(out, "\n{}", paint(BOLD, &format!("hub {}", hub.hub)));
        for sync in &hub.managed_by {
            let _ = writeln!(
                out,
                "  {}",
                paint(YELLOW, &format!("! {}", managed_note(sync)))
            );
        }
        if !hub.steps.is_empty() {
            let _ = writeln!(out, "  steps:");
            for (index, step) in hub.steps.iter().enumerate() {
                let _ = writeln!(out, "    {}. {step}", index + 1);
            }
        }
        for rollout in hub.rollout.iter().chain(&hub.addon_rollouts) {
            let mut lines = rollout_lines(rollout).into_iter();
            if let Some(title) = lines.next() {
                let _ = writeln!(out, "  {}", paint(BOLD, &title));
            }
            for line in lines {
                let _ = writeln!(out, "    {line}");
            }
        }
        for change in &hub.changes {
            let (mark, verb, code) = symbol(change.action);
            let _ = writeln!(
                out,
                "  {}",
                paint(code, &format!("{mark} {verb} {}", change.key))
            );
            for line in diff_body(change) {
                let painted = match line.chars().next() {
                    Some('+') => paint(GREEN, line),
                    Some('-') => paint(RED, line),
                    _ => line.to_string(),
                };
                let _ = writeln!(out, "      {painted}");
            }
        }
        for cluster in &hub.pending_clusters {
            let _ = writeln!(
                out,
                "  ? cluster {cluster} asked to join but is not in git (it stays pending)"
            );
        }
        if let Some(block) = &hub.prune_blocked {
            let _ = writeln!(
                out,
                "  {}",
                paint(
                    RED,
                    &format!(
                        "prune guard: this would unjoin {} of {} spokes ({}); the limit is {}. Apply with --allow-prune to go ahead.",
                        block.unjoining.len(),
                        block.spokes,
                        block.unjoining.join(", "),
                        block.limit
                    )
                )
            );
        }
    }
    let _ = writeln!(
        out,
        "\n{}",
        if plan.has_changes() {
            plan.summary()
        } else {
            "No changes: the fleet matches the repo.".to_string()
        }
    );
    out
}

/// The plan as Markdown for a pull-request comment, long diffs folded.
pub fn markdown(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### fleetform plan\n");
    let _ = writeln!(out, "Source: `{}`\n", plan.source);
    if !plan.has_changes() {
        let _ = writeln!(out, "**No changes**: the fleet matches the repo.");
        return out;
    }
    let _ = writeln!(out, "**{}**", plan.summary());
    for hub in plan.hubs.iter().filter(|hub| !is_empty(hub)) {
        let _ = writeln!(out, "\n#### Hub `{}`\n", hub.hub);
        if let Some(block) = &hub.prune_blocked {
            let _ = writeln!(
                out,
                "> [!WARNING]\n> The prune guard holds this hub back: it would unjoin {} of {} spokes ({}), the limit is {}.\n",
                block.unjoining.len(),
                block.spokes,
                block.unjoining.join(", "),
                block.limit
            );
        }
        for sync in &hub.managed_by {
            let _ = writeln!(out, "> [!NOTE]\n> {}\n", managed_note(sync));
        }
        for (index, step) in hub.steps.iter().enumerate() {
            let _ = writeln!(out, "{}. {step}", index + 1);
        }
        for rollout in hub.rollout.iter().chain(&hub.addon_rollouts) {
            let mut lines = rollout_lines(rollout).into_iter();
            if let Some(title) = lines.next() {
                let _ = writeln!(out, "\n**{title}**\n");
            }
            for line in lines {
                let _ = writeln!(out, "- {line}");
            }
        }
        for cluster in &hub.pending_clusters {
            let _ = writeln!(out, "- cluster `{cluster}` asked to join but is not in git");
        }
        for change in &hub.changes {
            let (mark, verb, _) = symbol(change.action);
            let body = diff_body(change).collect::<Vec<_>>().join("\n");
            let title = format!("{mark} {verb} {}", change.key);
            if body.lines().count() > FOLD_LINES {
                let _ = writeln!(
                    out,
                    "\n<details><summary>{title}</summary>\n\n```diff\n{body}\n```\n</details>"
                );
            } else {
                let _ = writeln!(out, "\n{title}\n\n```diff\n{body}\n```");
            }
        }
    }
    out
}

/// A hub's rollout for people: a title (strategy, how many spokes in how many waves, the blast
/// radius), a line per wave with its offline spokes and what happens to them, then a line per
/// distinct change with the spokes it changes.
fn rollout_lines(rollout: &RolloutPlan) -> Vec<String> {
    let percent = |count: usize| count * 100 / rollout.spokes.max(1);
    let what = if rollout.changes.iter().all(SpokeChange::agent_only) {
        "upgrade their agent"
    } else {
        "change"
    };
    let whose = rollout
        .addon
        .as_ref()
        .map(|addon| format!(" of addon {addon}"))
        .unwrap_or_default();
    let mut lines = vec![format!(
        "rollout{whose} ({:?}): {} spoke(s) {what} in {} wave(s); the first wave touches {} ({}%)",
        rollout.strategy,
        rollout.spokes,
        rollout.waves.len(),
        rollout.blast_radius,
        percent(rollout.blast_radius),
    )];
    for (index, wave) in rollout.waves.iter().enumerate() {
        let mut line = format!("wave {}", index + 1);
        if let Some(group) = &wave.group {
            let _ = write!(line, " (group {group})");
        }
        if wave.spokes.is_empty() {
            line.push_str(": no spoke online");
        } else {
            let _ = write!(line, ": {}", wave.spokes.join(", "));
        }
        if !wave.offline.is_empty() {
            // Offline spokes whose fate is told in the same words, in the wave's order.
            let mut fates: Vec<(String, Vec<&str>)> = Vec::new();
            for spoke in &wave.offline {
                let fate = match rollout.offline {
                    OfflinePolicy::Skip => {
                        let change = rollout.changes.iter().find(|change| change.spoke == *spoke);
                        format!("skipped now, {} at the end once back", once_back(change))
                    }
                    OfflinePolicy::Wait => "waited on until its progress deadline".to_string(),
                };
                match fates.iter_mut().find(|(told, _)| *told == fate) {
                    Some((_, spokes)) => spokes.push(spoke),
                    None => fates.push((fate, vec![spoke])),
                }
            }
            let told: Vec<String> = fates
                .iter()
                .map(|(fate, spokes)| format!("{} ({fate})", spokes.join(", ")))
                .collect();
            let _ = write!(line, "; offline now: {}", told.join(", "));
        }
        lines.push(line);
    }
    let mut by_change: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for change in &rollout.changes {
        by_change
            .entry(change.describe())
            .or_default()
            .push(&change.spoke);
    }
    for (change, spokes) in by_change {
        lines.push(format!("change {change}: {}", spokes.join(", ")));
    }
    lines
}

/// What happens to a spoke passed over while offline once it is back, for `change`, the
/// change the rollout makes to it: `upgraded`, `gets addon metrics`, `loses addons a, b`,
/// `gets lease duration 30 s`, joined with "and".
fn once_back(change: Option<&SpokeChange>) -> String {
    let addons = |verb: &str, addons: &[String]| match addons {
        [addon] => format!("{verb} addon {addon}"),
        _ => format!("{verb} addons {}", addons.join(", ")),
    };
    let mut parts = Vec::new();
    if let Some(change) = change {
        if change.agent.is_some() {
            parts.push("upgraded".to_string());
        }
        if !change.enable.is_empty() {
            parts.push(addons("gets", &change.enable));
        }
        if !change.disable.is_empty() {
            parts.push(addons("loses", &change.disable));
        }
        if let Some(lease) = &change.lease_duration_seconds {
            parts.push(format!("gets lease duration {} s", lease.to));
        }
    }
    match parts.split_last() {
        None => "changed".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// What a FleetSync on the hub means for this plan.
fn managed_note(sync: &ManagingSync) -> String {
    format!(
        "{sync} manages this hub: it reverts whatever is not in its commit, so commit and push this change rather than apply it"
    )
}

fn is_empty(hub: &HubPlan) -> bool {
    hub.changes.is_empty() && hub.steps.is_empty() && hub.pending_clusters.is_empty()
}

/// The diff without its `---`/`+++` header lines (the change's title says what it is).
fn diff_body(change: &ObjectChange) -> impl Iterator<Item = &str> {
    change
        .diff
        .lines()
        .filter(|line| !line.starts_with("--- ") && !line.starts_with("+++ "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fleet::RolloutStrategy;
    use crate::plan::rollout::Change;
    use crate::rollout::Wave;

    fn plan(offline: OfflinePolicy) -> Plan {
        let wave = |group: &str, spokes: &[&str], offline: &[&str]| Wave {
            group: Some(group.to_string()),
            spokes: spokes.iter().map(ToString::to_string).collect(),
            offline: offline.iter().map(ToString::to_string).collect(),
        };
        Plan {
            source: Origin::Directory {
                path: "fleet".into(),
                uncommitted_changes: false,
            },
            hubs: vec![HubPlan {
                hub: "hub".into(),
                steps: vec![super::super::Step::InstallHub],
                rollout: Some(RolloutPlan {
                    addon: None,
                    strategy: RolloutStrategy::Groups,
                    offline,
                    spokes: 4,
                    blast_radius: 1,
                    waves: vec![
                        wave("canary", &["a"], &[]),
                        wave("rest", &["b", "c"], &["d"]),
                    ],
                    changes: ["a", "b", "c", "d"]
                        .map(|spoke| SpokeChange {
                            spoke: spoke.to_string(),
                            agent: Some(Change {
                                from: "0.1.0".to_string(),
                                to: "0.2.0".to_string(),
                            }),
                            ..SpokeChange::default()
                        })
                        .into(),
                }),
                ..HubPlan::default()
            }],
        }
    }

    #[test]
    fn the_plan_shows_the_waves_the_blast_radius_and_what_happens_to_offline_spokes() {
        let text = text(&plan(OfflinePolicy::Skip), false);
        assert!(
            text.contains(
                "  rollout (Groups): 4 spoke(s) upgrade their agent in 2 wave(s); the first wave touches 1 (25%)\n    wave 1 (group canary): a\n    wave 2 (group rest): b, c; offline now: d (skipped now, upgraded at the end once back)\n"
            ),
            "{text}"
        );
        let markdown = markdown(&plan(OfflinePolicy::Wait));
        assert!(
            markdown.contains(
                "- wave 2 (group rest): b, c; offline now: d (waited on until its progress deadline)"
            ),
            "{markdown}"
        );
        let document = serde_json::to_value(document(&plan(OfflinePolicy::Skip))).unwrap();
        assert_eq!(document["hubs"][0]["rollout"]["blastRadius"], 1);
        assert_eq!(
            document["hubs"][0]["rollout"]["waves"][1]["offline"],
            serde_json::json!(["d"])
        );
    }

    #[test]
    fn an_offline_spoke_passed_over_is_told_what_it_gets_once_back() {
        let change = |spoke: &str| SpokeChange {
            spoke: spoke.to_string(),
            ..SpokeChange::default()
        };
        let mut plan = plan(OfflinePolicy::Skip);
        let rollout = plan.hubs[0].rollout.as_mut().expect("a rollout");
        rollout.waves[1].offline = vec!["d".into(), "e".into(), "f".into()];
        rollout.changes = vec![
            SpokeChange {
                enable: vec!["metrics".into()],
                ..change("d")
            },
            SpokeChange {
                lease_duration_seconds: Some(Change { from: 60, to: 30 }),
                disable: vec!["logging".into(), "tracing".into()],
                ..change("e")
            },
            SpokeChange {
                enable: vec!["metrics".into()],
                ..change("f")
            },
        ];
        let text = text(&plan, false);
        assert!(
            text.contains(
                "    wave 2 (group rest): b, c; offline now: d, f (skipped now, gets addon metrics at the end once back), e (skipped now, loses addons logging, tracing and gets lease duration 30 s at the end once back)\n"
            ),
            "{text}"
        );
        assert!(!text.contains("upgraded"), "no agent changes: {text}");
    }
}
