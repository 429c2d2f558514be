//! The dashboard's HTML, rendered from the view model: the Fleet, Spoke, Sync and Rollout pages,
//! the fleet page's row (also what a live update replaces) and the layout they share. Every
//! value from the API goes through maud, which escapes it; nothing here writes a `style` or
//! `script` of its own (the Content-Security-Policy forbids inline ones), and every page reads
//! whole without JavaScript.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use maud::{DOCTYPE, Markup, html};

use super::fleet_query::{FleetQuery, Page, SortKey};
use super::model::{EventLine, HubView, Model, Row, TIMELINE_SPAN, Transition};
use crate::api::fleet::{RolloutStatus, SpokeRolloutState, SyncRecord};
use crate::api::vocabulary::{STATUS_FALSE, STATUS_TRUE};
use crate::hub::observer::ClusterState;
use crate::status::{HubState, fleet_sync_rows, rollout_row};
use crate::sync::status::{REASON_PRUNE_BLOCKED, short_sha};

/// The topic every page listens to: fetch yourself again.
pub const EVERY_TOPIC: &str = "*";

/// The topic a page listens to for live updates (see `dashboard.js`).
pub fn fleet_topic() -> String {
    "fleet".to_string()
}
pub fn sync_topic() -> String {
    "sync".to_string()
}
pub fn spoke_topic(hub: &str, spoke: &str) -> String {
    format!("spoke:{hub}/{spoke}")
}
pub fn rollout_topic(hub: &str) -> String {
    format!("rollout:{hub}")
}

/// The id of a spoke's row on the fleet page.
pub fn row_id(hub: &str, spoke: &str) -> String {
    format!("row:{hub}/{spoke}")
}

/// The glyph that tells a Krake state apart without its colour, and the class that colours it.
fn state_look(state: &str) -> (&'static str, &'static str) {
    match state {
        "ONLINE" => ("●", "good"),
        "CONNECTING" => ("◐", "busy"),
        "PENDING" => ("○", "idle"),
        "DEGRADED" => ("▲", "warn"),
        "UNHEALTHY" => ("◆", "warn"),
        "FAILING_METRICS" => ("◇", "warn"),
        "NOTREADY" => ("■", "bad"),
        "OFFLINE" => ("✕", "bad"),
        _ => ("?", "idle"),
    }
}

/// A state as text, shape and colour.
fn state_badge(state: &str) -> Markup {
    let (glyph, look) = state_look(state);
    html! {
        span class={ "state " (look) } {
            span.glyph aria-hidden="true" { (glyph) } " " (state)
        }
    }
}

/// A condition's status (True, False, Unknown) as text, shape and colour: Unknown is not known
/// to be a failure, so it does not wear a failure's ✕.
fn status_badge(status: Option<&str>) -> Markup {
    let (glyph, look) = match status {
        Some(STATUS_TRUE) => ("●", "good"),
        Some(STATUS_FALSE) => ("■", "bad"),
        Some(_) => ("?", "warn"),
        None => ("○", "idle"),
    };
    html! {
        span class={ "state " (look) } {
            span.glyph aria-hidden="true" { (glyph) } " " (status.unwrap_or("-"))
        }
    }
}

fn time(at: Timestamp) -> Markup {
    html! { time datetime=(at.to_string()) { (at.strftime("%Y-%m-%d %H:%M:%S UTC")) } }
}

/// `42s`, `5m`, `3h`, `2d`.
pub fn age(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86400),
    }
}

/// Where a page is in the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Fleet,
    Sync,
    Rollout,
    Other,
}

/// The page around `body`: navigation, `<main>` carrying the live-update topic, the assets.
fn layout(
    model: &Model,
    title: &str,
    section: Section,
    topic: &str,
    now: Timestamp,
    body: Markup,
) -> Markup {
    let current = |this: Section| (section == this).then_some("page");
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · fleetform" }
                link rel="stylesheet" href="/assets/dashboard.css";
                script src="/assets/dashboard.js" defer {}
            }
            body data-now=(now.as_second()) data-version=(model.version) {
                a.skip href="#main" { "Skip to content" }
                header {
                    nav aria-label="Dashboard" {
                        ul {
                            li { a href="/" aria-current=[current(Section::Fleet)] { "Fleet" } }
                            li { a href="/sync" aria-current=[current(Section::Sync)] { "Sync" } }
                            @for hub in model.hubs.keys() {
                                li {
                                    a href={ "/hubs/" (hub) "/rollout" }
                                        aria-current=[current(Section::Rollout)] {
                                        "Rollout of " (hub)
                                    }
                                }
                            }
                        }
                    }
                    p.live role="status" aria-live="polite" {}
                }
                main id="main" tabindex="-1" data-topic=(topic) {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A spoke's row on the fleet page.
pub fn fleet_row(row: &Row, now: Timestamp) -> Markup {
    let status = &row.status;
    let spoke_href = format!("/hubs/{}/spokes/{}", status.hub, status.spoke);
    html! {
        tr id=(row_id(&status.hub, &status.spoke)) {
            th scope="row" { a href=(spoke_href) { (status.spoke) } }
            td { (status.hub) }
            td { (status.phase.as_deref().unwrap_or("-")) }
            td { (state_badge(&status.state)) }
            td { (status_badge(status.available.as_deref())) }
            @match row.renewed {
                Some(renewed) => td data-renewed=(renewed.as_second()) {
                    (age(now.duration_since(renewed).as_secs()))
                },
                None => td { "-" },
            }
            td { (status.agent_version.as_deref().unwrap_or("-")) }
            td {
                @match &status.nodes {
                    Some(nodes) => { (nodes.ready) "/" (nodes.total) }
                    None => "-",
                }
            }
            td { (status.addons_available) "/" (status.addons) }
            td { (status.claims) }
            td {
                @if let Some(reason) = &status.reason {
                    (reason)
                    @if let Some(message) = status.message.as_deref().filter(|m| !m.is_empty()) {
                        span.message { ": " (message) }
                    }
                } @else { "-" }
            }
        }
    }
}

/// A table's head: one column header per name.
fn column_heads(names: &[&str]) -> Markup {
    html! {
        thead { tr { @for name in names { th scope="col" { (name) } } } }
    }
}

/// Each hub's count of spokes by availability: the fleet page's summary.
pub fn fleet_summary(model: &Model) -> Markup {
    html! {
        table #summary {
            caption { "Hubs" }
            (column_heads(&["Hub", "Spokes", "Available", "Not available", "Unknown", "Rollout"]))
            tbody {
                @for (hub, view) in &model.hubs {
                    @let count = |status: Option<&str>| view.availability.of(status);
                    tr {
                        th scope="row" { a href={ "/?hub=" (hub) } { (hub) } }
                        td { (view.rows.len()) }
                        td { (count(Some(STATUS_TRUE))) }
                        td { (count(Some(STATUS_FALSE))) }
                        td { (count(Some("Unknown"))) }
                        td { a href={ "/hubs/" (hub) "/rollout" } { "Rollout of " (hub) } }
                    }
                }
            }
        }
    }
}

/// The fleet page: the hubs' summary, the filter, one page of spokes.
pub fn fleet_page(model: &Model, query: &FleetQuery, now: Timestamp) -> Markup {
    let page = query.select(model);
    let body = html! {
        (fleet_summary(model))
        form.filter method="get" action="/" role="search" {
            fieldset {
                legend { "Filter spokes" }
                label for="f-hub" { "Hub" }
                select #f-hub name="hub" {
                    option value="" { "All hubs" }
                    @for hub in model.hubs.keys() {
                        option value=(hub) selected[query.hub.as_deref() == Some(hub)] { (hub) }
                    }
                }
                label for="f-state" { "State" }
                select #f-state name="state" {
                    option value="" { "All states" }
                    @for state in ClusterState::ALL.map(ClusterState::as_str) {
                        option value=(state) selected[query.state.as_deref() == Some(state)] { (state) }
                    }
                }
                label for="f-label" { "Labels" }
                input #f-label name="label" type="text" value=[query.label.as_deref()]
                    placeholder="env=prod,region" aria-describedby="f-label-help";
                span #f-label-help .help { "key=value or key, comma-separated" }
                label for="f-name" { "Name" }
                input #f-name name="q" type="search" value=[query.name.as_deref()];
                @if query.sort != SortKey::default() {
                    input type="hidden" name="sort" value=(query.sort.as_str());
                }
                @if query.descending { input type="hidden" name="order" value="desc"; }
                button type="submit" { "Filter" }
                a href="/" { "Clear" }
            }
        }
        (spoke_table(query, &page, now))
    };
    layout(model, "Fleet", Section::Fleet, &fleet_topic(), now, body)
}

fn spoke_table(query: &FleetQuery, page: &Page, now: Timestamp) -> Markup {
    let columns = [
        (SortKey::Spoke, "Spoke"),
        (SortKey::Hub, "Hub"),
        (SortKey::Phase, "Phase"),
        (SortKey::State, "State"),
        (SortKey::Available, "Available"),
        (SortKey::LeaseAge, "Lease age"),
        (SortKey::Agent, "Agent"),
    ];
    let tail = [
        ("Nodes ready", None),
        ("Addons healthy", Some(SortKey::Addons)),
        ("Claims", Some(SortKey::Claims)),
        ("Reason", None),
    ];
    let header = |key: SortKey, label: &str| {
        let sorted = query.sort == key;
        let aria = sorted.then_some(if query.descending {
            "descending"
        } else {
            "ascending"
        });
        let descending = sorted && !query.descending;
        html! {
            th scope="col" aria-sort=[aria] {
                a href={ "/?" (query.to_query(key, descending, 1)) } {
                    (label)
                    @if sorted {
                        span.glyph aria-hidden="true" { @if query.descending { " ▼" } @else { " ▲" } }
                    }
                }
            }
        }
    };
    html! {
        p #count {
            @if page.matched == 0 { "No spoke matches." }
            @else {
                "Spokes " (page.first + 1) "–" (page.first + page.rows.len()) " of " (page.matched)
            }
        }
        table #spokes {
            caption { "Spokes" }
            thead {
                tr {
                    @for (key, label) in columns { (header(key, label)) }
                    @for (label, key) in tail {
                        @match key {
                            Some(key) => (header(key, label)),
                            None => th scope="col" { (label) },
                        }
                    }
                }
            }
            tbody {
                @for row in &page.rows { (fleet_row(row, now)) }
            }
        }
        @if page.pages > 1 {
            nav.pages aria-label="Pages" {
                @if page.page > 1 {
                    a rel="prev" href={ "/?" (query.to_query(query.sort, query.descending, page.page - 1)) } { "Previous" }
                }
                span { "Page " (page.page) " of " (page.pages) }
                @if page.page < page.pages {
                    a rel="next" href={ "/?" (query.to_query(query.sort, query.descending, page.page + 1)) } { "Next" }
                }
            }
        }
    }
}

fn conditions_table(caption: &str, conditions: &[Condition]) -> Markup {
    html! {
        table {
            caption { (caption) }
            (column_heads(&["Type", "Status", "Reason", "Message", "Since"]))
            tbody {
                @for condition in conditions {
                    tr {
                        th scope="row" { (condition.type_) }
                        td { (status_badge(Some(&condition.status))) }
                        td { (condition.reason) }
                        td.message { (condition.message) }
                        td { (time(condition.last_transition_time.0)) }
                    }
                }
            }
        }
    }
}

fn events_table<'a>(caption: &str, events: impl Iterator<Item = &'a EventLine>) -> Markup {
    let events: Vec<&EventLine> = events.collect();
    html! {
        @if events.is_empty() {
            p { "No " (caption.to_lowercase()) " seen." }
        } @else {
            table {
                caption { (caption) }
                (column_heads(&["When", "Type", "Reason", "Note"]))
                tbody {
                    @for event in &events {
                        tr {
                            td { @if let Some(at) = event.time { (time(at)) } @else { "-" } }
                            td {
                                @if event.warning {
                                    span class="state warn" { span.glyph aria-hidden="true" { "▲" } " Warning" }
                                } @else { "Normal" }
                            }
                            th scope="row" { (event.reason) @if event.count > 1 { " ×" (event.count) } }
                            td.message { (event.note) }
                        }
                    }
                }
            }
        }
    }
}

/// The periods of the last day (from `now - TIMELINE_SPAN`) `transitions` make, oldest first:
/// start, end, availability.
pub fn periods(
    transitions: &[Transition],
    now: Timestamp,
) -> Vec<(Timestamp, Timestamp, Option<String>)> {
    let since = now - TIMELINE_SPAN;
    transitions
        .iter()
        .enumerate()
        .filter_map(|(index, transition)| {
            let end = transitions.get(index + 1).map_or(now, |next| next.at);
            (end > since).then(|| (transition.at.max(since), end, transition.available.clone()))
        })
        .collect()
}

/// A spoke's availability over the last day: a bar (for the eye) and a list (for everyone).
fn timeline(transitions: &[Transition], now: Timestamp) -> Markup {
    let periods = periods(transitions, now);
    // Hundredths of the day, at least one so that a short period still shows.
    let share = |start: Timestamp, end: Timestamp| {
        let share = end.duration_since(start).as_secs() as f64 / TIMELINE_SPAN.as_secs() as f64;
        ((share * 100.0).round() as u32).clamp(1, 100)
    };
    let class = |available: &Option<String>| match available.as_deref() {
        Some(STATUS_TRUE) => "good",
        Some(STATUS_FALSE) => "bad",
        Some(_) => "warn",
        None => "idle",
    };
    html! {
        section aria-labelledby="timeline-title" {
            h2 #timeline-title { "Availability, last 24 hours" }
            @if let Some((first, _, _)) = periods.first() {
                p { "Since " (time(*first)) ", as the hub tells it." }
                div.bar aria-hidden="true" {
                    // The part of the day before this process watched: blank, to scale.
                    @if *first > now - TIMELINE_SPAN {
                        span class={ "segment unwatched grow-" (share(now - TIMELINE_SPAN, *first)) } {}
                    }
                    @for (start, end, available) in &periods {
                        span class={ "segment " (class(available)) " grow-" (share(*start, *end)) } {}
                    }
                }
                ol.periods {
                    @for (start, end, available) in periods.iter().rev() {
                        li {
                            (status_badge(available.as_deref())) " from " (time(*start)) " to "
                            @if *end == now { "now" } @else { (time(*end)) }
                            " (" (age(end.duration_since(*start).as_secs())) ")"
                        }
                    }
                }
            } @else {
                p { "Nothing watched yet." }
            }
        }
    }
}

/// A spoke's page; `None` when the hub has no such spoke.
pub fn spoke_page(model: &Model, hub: &str, spoke: &str, now: Timestamp) -> Option<Markup> {
    let view = model.hubs.get(hub)?;
    let object = view.spokes.objects.get(spoke)?;
    let row = view.rows.get(spoke)?;
    let cluster = view.clusters.objects.get(spoke);
    let status = &row.status;
    let spoke_conditions = object
        .status
        .as_ref()
        .map(|status| status.conditions.as_slice())
        .unwrap_or_default();
    let cluster_status = cluster.and_then(|cluster| cluster.status.as_ref());
    let taints = cluster
        .map(|cluster| cluster.spec.taints.as_slice())
        .unwrap_or_default();
    let transitions: Vec<Transition> = view
        .timelines
        .get(spoke)
        .map(|timeline| timeline.iter().cloned().collect())
        .unwrap_or_default();
    let body = html! {
        p { "Hub " a href={ "/?hub=" (hub) } { (hub) } }
        section aria-labelledby="summary-title" {
            h2 #summary-title { "Summary" }
            dl.summary {
                dt { "State" } dd { (state_badge(&status.state)) }
                dt { "Available" } dd { (status_badge(status.available.as_deref())) }
                dt { "Phase" } dd { (status.phase.as_deref().unwrap_or("-")) }
                dt { "Needs attention" }
                dd {
                    @match &status.reason {
                        Some(reason) => { (reason) ": " (status.message.as_deref().unwrap_or_default()) }
                        None => "no",
                    }
                }
                dt { "Agent" } dd { (status.agent_version.as_deref().unwrap_or("-")) }
                dt { "Lease age" }
                @match row.renewed {
                    Some(renewed) => dd data-renewed=(renewed.as_second()) { (age(now.duration_since(renewed).as_secs())) },
                    None => dd { "-" },
                }
                dt { "Labels" }
                dd {
                    @for (key, value) in &row.labels { code { (key) "=" (value) } " " }
                }
                dt { "Finalizers" }
                dd {
                    @for finalizer in object.metadata.finalizers.iter().flatten() { code { (finalizer) } " " }
                }
                @if let Some(deleted) = &object.metadata.deletion_timestamp {
                    dt { "Deleting since" } dd { (time(deleted.0)) }
                }
            }
        }
        (timeline(&transitions, now))
        section aria-labelledby="conditions-title" {
            h2 #conditions-title { "Conditions" }
            (conditions_table("Spoke conditions", spoke_conditions))
            (conditions_table("ManagedCluster conditions", cluster_status.map(|s| s.conditions.as_slice()).unwrap_or_default()))
        }
        section aria-labelledby="taints-title" {
            h2 #taints-title { "Taints" }
            @if taints.is_empty() { p { "None." } } @else {
                ul { @for taint in taints { li { code { (taint.key) } " " (format!("{:?}", taint.effect)) } } }
            }
        }
        section aria-labelledby="nodes-title" {
            h2 #nodes-title { "Nodes" }
            @match cluster.and_then(|cluster| cluster.node_health()) {
                Some(nodes) => dl.summary {
                    dt { "Ready" } dd { (nodes.ready) " of " (nodes.total) }
                    dt { "PID pressure" } dd { (nodes.pid_pressure) }
                    dt { "Memory pressure" } dd { (nodes.memory_pressure) }
                    dt { "Disk pressure" } dd { (nodes.disk_pressure) }
                },
                None => p { "Not reported." },
            }
        }
        section aria-labelledby="addons-title" {
            h2 #addons-title { "Addons" }
            table {
                caption { "Addons, " (status.addons_available) " of " (status.addons) " healthy" }
                (column_heads(&["Addon", "Available", "Reason", "Install namespace"]))
                tbody {
                    @for addon in view.addons_of(spoke) {
                        tr {
                            th scope="row" { (addon.name) }
                            td { (status_badge(addon.available.as_ref().map(|(status, _)| status.as_str()))) }
                            td { (addon.available.as_ref().map_or("-", |(_, reason)| reason.as_str())) }
                            td { (addon.install_namespace()) }
                        }
                    }
                }
            }
        }
        section aria-labelledby="claims-title" {
            h2 #claims-title { "Cluster claims" }
            @let claims = cluster_status.map(|s| s.cluster_claims.as_slice()).unwrap_or_default();
            @if claims.is_empty() { p { "None reported." } } @else {
                table {
                    caption { "Claims as the hub sees them" }
                    (column_heads(&["Name", "Value"]))
                    tbody { @for claim in claims { tr { th scope="row" { (claim.name) } td { (claim.value) } } } }
                }
            }
        }
        section aria-labelledby="events-title" {
            h2 #events-title { "Events" }
            (events_table("Events", view.events_of("Spoke", spoke)))
        }
    };
    Some(layout(
        model,
        &format!("Spoke {spoke}"),
        Section::Other,
        &spoke_topic(hub, spoke),
        now,
        body,
    ))
}

/// The Sync page: every hub's FleetSyncs, the commits they applied and attempted, what holds
/// them, the commits they fetched last (their recent syncs) and their latest Events.
pub fn sync_page(model: &Model, now: Timestamp) -> Markup {
    let body = html! {
        @for (hub, view) in &model.hubs {
            @let rows = fleet_sync_rows(&HubState {
                hub: hub.clone(),
                fleet_syncs: view.fleet_syncs.objects.values().map(|object| (**object).clone()).collect(),
                ..HubState::default()
            });
            section aria-labelledby={ "hub-" (hub) } {
                h2 id={ "hub-" (hub) } { "Hub " (hub) }
                @if rows.is_empty() { p { "No FleetSync on this hub." } }
                @for sync in &rows {
                    @let state = match sync.state.as_str() { "Ready" => "ONLINE", "Stalled" => "NOTREADY", "NotReady" => "DEGRADED", _ => "PENDING" };
                    article aria-labelledby={ "sync-" (hub) "-" (sync.fleet_sync) } {
                        h3 id={ "sync-" (hub) "-" (sync.fleet_sync) } { "FleetSync " (sync.fleet_sync) }
                        dl.summary {
                            dt { "State" }
                            dd { span class={ "state " (state_look(state).1) } { span.glyph aria-hidden="true" { (state_look(state).0) } " " (sync.state) } }
                            dt { "Follows" } dd { code { (sync.repo) } " at " code { (sync.git_ref) } }
                            dt { "Last applied commit" }
                            dd { @match &sync.last_applied_commit { Some(c) => code title=(c) { (short_sha(c)) }, None => "-" } }
                            dt { "Last attempted commit" }
                            dd { @match &sync.last_attempted_commit { Some(c) => code title=(c) { (short_sha(c)) }, None => "-" } }
                            @if let Some(reason) = &sync.reason {
                                dt { "Why" } dd.message { (reason) ": " (sync.message.as_deref().unwrap_or_default()) }
                            }
                            @if let Some(halted) = &sync.rollout_halted {
                                dt { "Rollout halted" } dd.message { (halted) }
                            }
                        }
                        @if sync.reason.as_deref() == Some(REASON_PRUNE_BLOCKED) {
                            div.hold role="note" {
                                h4 { "Held by the prune guard" }
                                p.message { (sync.message.as_deref().unwrap_or_default()) }
                            }
                        }
                        @if let Some(status) = view.fleet_syncs.objects.get(&sync.fleet_sync).and_then(|object| object.status.as_ref()) {
                            (recent_syncs(&status.recent_syncs))
                        }
                        (events_table("Events", view.events_of("FleetSync", &sync.fleet_sync)))
                    }
                }
            }
        }
    };
    layout(model, "Sync", Section::Sync, &sync_topic(), now, body)
}

/// The commits a FleetSync fetched last, newest first: subject, signer, what became of each
/// and what its plan wrote (in a `<details>`, which opens without JavaScript).
fn recent_syncs(records: &[SyncRecord]) -> Markup {
    html! {
        @if !records.is_empty() {
            table {
                caption { "Recent syncs: the commits fetched" }
                (column_heads(&["Commit", "Signed by", "When", "Outcome", "Plan"]))
                tbody {
                    @for record in records {
                        tr {
                            th scope="row" { code title=(record.commit) { (short_sha(&record.commit)) } " " (record.subject) }
                            td { (record.signer.as_deref().unwrap_or("-")) }
                            td { (time(record.time.0)) }
                            td { (record.reason) }
                            td.message {
                                @if record.changes.is_empty() { (record.summary) } @else {
                                    details {
                                        summary { (record.summary) }
                                        ul { @for change in &record.changes { li { (change) } } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `a, b` or `none`.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

fn rollout_state(state: SpokeRolloutState) -> (&'static str, &'static str) {
    match state {
        SpokeRolloutState::Pending => ("Pending", "PENDING"),
        SpokeRolloutState::InProgress => ("In progress", "CONNECTING"),
        SpokeRolloutState::Succeeded => ("Succeeded", "ONLINE"),
        SpokeRolloutState::Failed => ("Failed", "NOTREADY"),
        SpokeRolloutState::SkippedOffline => ("Skipped offline", "OFFLINE"),
    }
}

/// A hub's rollout page: its own rollout, then each addon's with a rollout of its own; `None`
/// when there is no such hub.
pub fn rollout_page(model: &Model, hub: &str, now: Timestamp) -> Option<Markup> {
    let view: &HubView = model.hubs.get(hub)?;
    let status = view
        .hubs
        .objects
        .get(hub)
        .and_then(|object| object.status.as_ref());
    let rollout = status.and_then(|status| status.rollout.as_ref());
    let addon_rollouts = status
        .map(|status| status.addon_rollouts.as_slice())
        .unwrap_or_default();
    let body = html! {
        @match rollout {
            None => p { "Hub " (hub) " rolls its agent out to every spoke at once (no rollout status)." },
            Some(rollout) => (rollout_section(hub, "rollout", None, rollout)),
        }
        @for (index, addon) in addon_rollouts.iter().enumerate() {
            section aria-labelledby={ "addon-rollout-" (index) } {
                h2 id={ "addon-rollout-" (index) } { "Rollout of addon " (addon.addon) }
                (rollout_section(hub, &format!("addon-{index}"), Some(&addon.addon), &addon.rollout))
            }
        }
        section aria-labelledby="events-title" {
            h2 #events-title { "Events" }
            (events_table("Events of the hub", view.events_of("Hub", hub)))
        }
    };
    Some(layout(
        model,
        &format!("Rollout of {hub}"),
        Section::Rollout,
        &rollout_topic(hub),
        now,
        body,
    ))
}

/// Where one rollout stands: the hub's (`addon` none) or an addon's own; `id` keeps the
/// headings' ids apart on the page.
fn rollout_section(hub: &str, id: &str, addon: Option<&str>, rollout: &RolloutStatus) -> Markup {
    let row = rollout_row(hub, rollout);
    let what = addon.map_or_else(
        || "the hub's rollout".to_string(),
        |addon| format!("addon {addon}"),
    );
    html! {
        dl.summary {
            dt { "Target" } dd { code { (row.target) } }
            dt { "Done" } dd { (row.done) " of " (row.total) }
            dt { "Wave" } dd { @match row.wave { Some(wave) => (wave), None => "complete" } }
            dt { "In progress" } dd { (listed(&row.in_progress)) }
            dt { "Skipped offline" } dd { (listed(&row.skipped_offline)) }
            @if let Some(halted) = &row.halted {
                dt { "Halted" } dd.message { (halted) }
            }
        }
        @if !row.failed.is_empty() {
            section aria-labelledby={ (id) "-failed" } {
                h3 id={ (id) "-failed" } { "Failures of " (what) }
                ul { @for failed in &row.failed { li { a href={ "/hubs/" (hub) "/spokes/" (failed.spoke) } { (failed.spoke) } ": " (failed.reason) } } }
            }
        }
        table {
            caption { "Spokes in " (what) }
            (column_heads(&["Spoke", "State", "Target", "Released", "Running target since", "Why"]))
            tbody {
                @for spoke in &rollout.spokes {
                    @let (text, look) = rollout_state(spoke.state);
                    tr {
                        th scope="row" { a href={ "/hubs/" (hub) "/spokes/" (spoke.name) } { (spoke.name) } }
                        td { span class={ "state " (state_look(look).1) } { span.glyph aria-hidden="true" { (state_look(look).0) } " " (text) } }
                        td { code { (spoke.target) } }
                        td { @if let Some(at) = &spoke.released_at { (time(at.0)) } @else { "-" } }
                        td { @if let Some(at) = &spoke.updated_at { (time(at.0)) } @else { "-" } }
                        td.message { (spoke.reason.as_deref().unwrap_or_default()) }
                    }
                }
            }
        }
    }
}

/// A page saying what was not found.
pub fn not_found(model: &Model, what: &str, now: Timestamp) -> Markup {
    layout(
        model,
        "Not found",
        Section::Other,
        "",
        now,
        html! { p { (what) " is not known here." } p { a href="/" { "Back to the fleet" } } },
    )
}

/// The page that asks for the dashboard's token.
pub fn login_page(failed: bool) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Sign in · fleetform" }
                link rel="stylesheet" href="/assets/dashboard.css";
            }
            body {
                main id="main" {
                    h1 { "fleetform dashboard" }
                    @if failed { p.message role="alert" { "That token is not this dashboard's." } }
                    form method="get" action="/" {
                        label for="token" { "Token (key " code { "token" } " of the Secret named by --dashboard-token-secret)" }
                        input #token name="token" type="password" autocomplete="current-password" required;
                        button type="submit" { "Sign in" }
                    }
                }
            }
        }
    }
}

/// The CSS of the timeline's segments: `grow-N` takes N parts of a hundred (classes, since the
/// Content-Security-Policy allows no style attribute).
pub fn segment_css() -> String {
    (1..=100)
        .map(|share| format!(".grow-{share}{{flex-grow:{share}}}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::model::Observed;
    use crate::dashboard::model::tests::{at, cluster, model_with, spoke};
    use kube::runtime::watcher;
    use serde_json::json;

    #[test]
    fn values_from_the_api_are_escaped_everywhere() {
        let mut hostile = spoke("edge", json!({"team": "<script>alert(1)</script>"}));
        hostile.status.as_mut().unwrap().agent_version =
            Some("\"><img src=x onerror=alert(1)>".into());
        let model = model_with(&[hostile]);
        let now = at(10);
        let pages = [
            fleet_page(&model, &FleetQuery::parse("label=team"), now).into_string(),
            spoke_page(&model, "hub", "edge", now)
                .unwrap()
                .into_string(),
        ];
        for page in pages {
            assert!(!page.contains("<script>alert"), "{page}");
            assert!(!page.contains("<img"), "{page}");
            assert!(
                !page.contains("<lease>"),
                "a condition's message is escaped"
            );
            assert!(!page.contains("style="), "no inline style");
            assert!(page.contains("&lt;"), "{page}");
        }
    }

    #[test]
    fn the_fleet_page_shows_state_as_text_and_shape_and_the_filter_it_was_given() {
        let model = model_with(&[
            spoke("edge", json!({"env": "prod"})),
            spoke("core", json!({})),
        ]);
        let page = fleet_page(
            &model,
            &FleetQuery::parse("label=env%3Dprod&sort=state"),
            at(10),
        )
        .into_string();
        assert!(
            page.contains(r#"<span class="glyph" aria-hidden="true">●</span> ONLINE"#),
            "{page}"
        );
        assert!(page.contains(r#"id="row:hub/edge""#), "{page}");
        assert!(
            !page.contains(r#"id="row:hub/core""#),
            "filtered out: {page}"
        );
        assert!(
            page.contains(r#"value="env=prod""#),
            "the filter stays filled in"
        );
        assert!(page.contains(r#"aria-sort="ascending""#), "{page}");
        assert!(page.contains("Spokes 1–1 of 1"), "{page}");
    }

    #[test]
    fn the_spoke_page_has_its_conditions_claims_finalizers_and_a_day_of_availability() {
        let mut model = model_with(&[spoke("edge", json!({}))]);
        model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge", "Unknown"))),
            at(3600),
        );
        let page = spoke_page(&model, "hub", "edge", at(7200))
            .unwrap()
            .into_string();
        for expected in [
            "ManagedClusterLeaseUpdateStopped",
            "fleetform.io/hub-cleanup",
            "&lt;eu&gt;",
            "cluster.open-cluster-management.io/unreachable",
            "(1h)",
        ] {
            assert!(page.contains(expected), "{expected} in {page}");
        }
        assert!(
            page.contains("segment warn grow-4"),
            "an hour of Unknown is ~4 % of the day: {page}"
        );
        assert!(
            page.contains("segment unwatched grow-92"),
            "the 22 hours before the process watched are blank: {page}"
        );
        assert!(spoke_page(&model, "hub", "nope", at(0)).is_none());
    }

    #[test]
    fn unknown_is_not_drawn_as_a_failure_nor_a_warning_event_as_false() {
        let unknown = status_badge(Some("Unknown")).into_string();
        assert!(!unknown.contains('✕'), "{unknown}");
        assert!(unknown.contains("Unknown"), "{unknown}");
        let lines = [EventLine {
            uid: "u".into(),
            time: Some(at(0)),
            warning: true,
            reason: "SpokeUnreachable".into(),
            note: "cannot reach it".into(),
            count: 1,
        }];
        let table = events_table("Events", lines.iter()).into_string();
        assert!(table.contains(" Warning"), "{table}");
        assert!(!table.contains("False"), "{table}");
    }

    #[test]
    fn periods_are_clipped_to_the_last_day() {
        let transitions = [
            Transition {
                at: at(0),
                available: Some("True".into()),
            },
            Transition {
                at: at(100_000),
                available: Some("Unknown".into()),
            },
        ];
        let now = at(100_000 + 3600);
        let periods = periods(&transitions, now);
        assert_eq!(periods[0].0, now - TIMELINE_SPAN);
        assert_eq!(periods[1], (at(100_000), now, Some("Unknown".into())));
    }

    #[test]
    fn the_rollout_page_shows_the_hubs_rollout_and_each_addons_own() {
        let mut model = model_with(&[spoke("edge", json!({}))]);
        let hub: crate::api::fleet::Hub = serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "Hub",
            "metadata": {"name": "hub", "namespace": "fleetform-system"},
            "spec": {"kubeconfig": {"embedded": {}}},
            "status": {
                "rollout": {"target": "2.0.0/00ff", "spokes": [
                    {"name": "edge", "target": "h", "state": "succeeded"}]},
                "addonRollouts": [{"addon": "metrics", "rollout": {"target": "metrics/0a1b", "wave": 1, "spokes": [
                    {"name": "edge", "target": "m", "state": "failed", "reason": "addons not Available: metrics"}]}}],
            },
        }))
        .unwrap();
        model.observe("hub", Observed::Hub(watcher::Event::Apply(hub)), at(0));
        let page = rollout_page(&model, "hub", at(1)).unwrap().into_string();
        assert!(page.contains("2.0.0/00ff"), "{page}");
        assert!(page.contains("Rollout of addon metrics"), "{page}");
        assert!(page.contains("Failures of addon metrics"), "{page}");
        assert!(page.contains("addons not Available: metrics"), "{page}");
    }

    #[test]
    fn the_sync_page_lists_the_commits_fetched_with_signer_outcome_and_plan() {
        let mut model = model_with(&[]);
        let fleetsync: crate::api::fleet::FleetSync = serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
            "metadata": {"name": "fleet", "namespace": "fleetform-system"},
            "spec": {"repo": "https://git.example/fleet.git"},
            "status": {"recentSyncs": [
                {"commit": "bad0000000000000000000000000000000000000", "subject": "<b>broken</b>",
                 "time": "2027-01-15T08:01:00Z", "reason": "InvalidCommit",
                 "summary": "spokes/edge.yaml:1:1: /spec: wrong"},
                {"commit": "600d000000000000000000000000000000000000", "subject": "lease 30s",
                 "signer": "SSH key SHA256:abc (alice@example.com)",
                 "time": "2027-01-15T08:00:00Z", "reason": "Applied",
                 "summary": "0 created, 1 updated, 0 deleted",
                 "changes": ["updated Spoke fleetform-system/edge"]},
            ]},
        }))
        .unwrap();
        model.observe(
            "hub",
            Observed::FleetSync(watcher::Event::Apply(fleetsync)),
            at(0),
        );
        let page = sync_page(&model, at(1)).into_string();
        // Each table under the heading that says what it holds.
        let captions: Vec<&str> = page
            .split("<caption>")
            .skip(1)
            .filter_map(|rest| rest.split("</caption>").next())
            .collect();
        assert_eq!(captions, ["Recent syncs: the commits fetched"], "{page}");
        assert!(page.contains("No events seen."), "{page}");
        assert!(page.contains("&lt;b&gt;broken&lt;/b&gt;"), "{page}");
        assert!(
            page.contains("SSH key SHA256:abc (alice@example.com)"),
            "{page}"
        );
        assert!(
            page.contains("<summary>0 created, 1 updated, 0 deleted</summary>"),
            "{page}"
        );
        assert!(
            page.contains("updated Spoke fleetform-system/edge"),
            "{page}"
        );
        assert!(
            page.find("bad0000").unwrap() < page.find("600d000").unwrap(),
            "newest first"
        );
    }
}
