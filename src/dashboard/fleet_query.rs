//! What the fleet page is asked for in its query string (filter by hub, state, labels and name;
//! sort; page) and the one page of rows it answers with. Pure: the same query over the same
//! rows is the same page, so it is unit-tested here and the viewers' filtering costs no API
//! request.

use std::cmp::Ordering;

use super::model::{Model, Row};

/// Rows on one page of the fleet page.
pub const PAGE_SIZE: usize = 100;

/// What the fleet page shows, from its query string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetQuery {
    pub hub: Option<String>,
    /// A Krake state (`ONLINE`, `OFFLINE`, …).
    pub state: Option<String>,
    /// Label terms separated by commas, each `key=value` or `key` (has the label).
    pub label: Option<String>,
    /// Part of the spoke's name.
    pub name: Option<String>,
    pub sort: SortKey,
    pub descending: bool,
    /// 1-based.
    pub page: usize,
}

/// The columns the fleet page sorts by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    #[default]
    Spoke,
    Hub,
    Phase,
    State,
    Available,
    LeaseAge,
    Agent,
    Addons,
    Claims,
}

impl SortKey {
    pub const ALL: [SortKey; 9] = [
        SortKey::Spoke,
        SortKey::Hub,
        SortKey::Phase,
        SortKey::State,
        SortKey::Available,
        SortKey::LeaseAge,
        SortKey::Agent,
        SortKey::Addons,
        SortKey::Claims,
    ];

    /// Its name in the query string.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Spoke => "spoke",
            SortKey::Hub => "hub",
            SortKey::Phase => "phase",
            SortKey::State => "state",
            SortKey::Available => "available",
            SortKey::LeaseAge => "lease",
            SortKey::Agent => "agent",
            SortKey::Addons => "addons",
            SortKey::Claims => "claims",
        }
    }

    fn compare(self, a: &Row, b: &Row) -> Ordering {
        // A lease age ascending is its renewal time descending (rows without a lease last).
        if self == SortKey::LeaseAge {
            return b.renewed.cmp(&a.renewed);
        }
        let (a, b) = (&a.status, &b.status);
        match self {
            SortKey::Spoke | SortKey::LeaseAge => Ordering::Equal,
            SortKey::Hub => a.hub.cmp(&b.hub),
            SortKey::Phase => a.phase.cmp(&b.phase),
            SortKey::State => a.state.cmp(&b.state),
            SortKey::Available => a.available.cmp(&b.available),
            SortKey::Agent => a.agent_version.cmp(&b.agent_version),
            SortKey::Addons => (a.addons - a.addons_available, a.addons)
                .cmp(&(b.addons - b.addons_available, b.addons)),
            SortKey::Claims => a.claims.cmp(&b.claims),
        }
    }
}

impl FleetQuery {
    /// Reads a query string (`hub=…&state=…&label=…&q=…&sort=…&order=desc&page=…`); what it
    /// does not know or cannot read it leaves at the default.
    pub fn parse(query: &str) -> FleetQuery {
        let mut parsed = FleetQuery {
            page: 1,
            ..FleetQuery::default()
        };
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let value = value.trim().to_string();
            let given = (!value.is_empty()).then_some(value.clone());
            match key.as_ref() {
                "hub" => parsed.hub = given,
                "state" => parsed.state = given,
                "label" => parsed.label = given,
                "q" => parsed.name = given,
                "sort" => {
                    parsed.sort = SortKey::ALL
                        .into_iter()
                        .find(|key| key.as_str() == value)
                        .unwrap_or_default();
                }
                "order" => parsed.descending = value == "desc",
                "page" => parsed.page = value.parse().unwrap_or(1).max(1),
                _ => {}
            }
        }
        parsed
    }

    /// The query string of this query, `page` and `sort` replaced as given.
    pub fn to_query(&self, sort: SortKey, descending: bool, page: usize) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (key, value) in [
            ("hub", &self.hub),
            ("state", &self.state),
            ("label", &self.label),
            ("q", &self.name),
        ] {
            if let Some(value) = value {
                query.append_pair(key, value);
            }
        }
        if sort != SortKey::default() {
            query.append_pair("sort", sort.as_str());
        }
        if descending {
            query.append_pair("order", "desc");
        }
        if page > 1 {
            query.append_pair("page", &page.to_string());
        }
        query.finish()
    }

    fn matches(&self, row: &Row) -> bool {
        let status = &row.status;
        self.hub.as_ref().is_none_or(|hub| &status.hub == hub)
            && self
                .state
                .as_ref()
                .is_none_or(|state| &status.state == state)
            && self
                .name
                .as_ref()
                .is_none_or(|name| status.spoke.contains(name.as_str()))
            && self.label.as_ref().is_none_or(|terms| {
                terms
                    .split(',')
                    .map(str::trim)
                    .filter(|term| !term.is_empty())
                    .all(|term| match term.split_once('=') {
                        Some((key, value)) => {
                            row.labels.get(key.trim()).map(String::as_str) == Some(value.trim())
                        }
                        None => row.labels.contains_key(term),
                    })
            })
    }

    /// The rows this query selects, sorted, and the one page of them it shows.
    pub fn select<'a>(&self, model: &'a Model) -> Page<'a> {
        let mut rows: Vec<&Row> = model
            .hubs
            .values()
            .flat_map(|view| view.rows.values())
            .filter(|row| self.matches(row))
            .collect();
        let by_name = |a: &&Row, b: &&Row| {
            (&a.status.spoke, &a.status.hub).cmp(&(&b.status.spoke, &b.status.hub))
        };
        rows.sort_by(|a, b| self.sort.compare(a, b).then_with(|| by_name(a, b)));
        if self.descending {
            rows.reverse();
        }
        let matched = rows.len();
        let pages = matched.div_ceil(PAGE_SIZE).max(1);
        let page = self.page.min(pages);
        let first = (page - 1) * PAGE_SIZE;
        Page {
            rows: rows.into_iter().skip(first).take(PAGE_SIZE).collect(),
            matched,
            first,
            page,
            pages,
        }
    }
}

/// One page of the fleet page's rows.
#[derive(Debug)]
pub struct Page<'a> {
    pub rows: Vec<&'a Row>,
    /// Rows the filter selects, on every page.
    pub matched: usize,
    /// Index of the first row shown among them.
    pub first: usize,
    /// 1-based, at most `pages`.
    pub page: usize,
    pub pages: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::model::Observed;
    use crate::dashboard::model::tests::{at, cluster, model_with, spoke};
    use kube::runtime::watcher;
    use serde_json::json;

    fn names(page: &Page) -> Vec<String> {
        page.rows
            .iter()
            .map(|row| row.status.spoke.clone())
            .collect()
    }

    #[test]
    fn the_query_string_filters_by_state_label_and_name_and_round_trips() {
        let mut model = model_with(&[
            spoke("edge-1", json!({"env": "prod", "region": "eu"})),
            spoke("edge-2", json!({"env": "dev"})),
            spoke("core", json!({"env": "prod"})),
        ]);
        model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("edge-1", "Unknown"))),
            at(1),
        );
        let query = FleetQuery::parse("state=OFFLINE");
        assert_eq!(names(&query.select(&model)), ["edge-1"]);
        let query = FleetQuery::parse("label=env%3Dprod&q=edge");
        assert_eq!(names(&query.select(&model)), ["edge-1"]);
        let query = FleetQuery::parse("label=region");
        assert_eq!(names(&query.select(&model)), ["edge-1"]);
        let query = FleetQuery::parse("hub=other");
        assert_eq!(query.select(&model).matched, 0);
        let query = FleetQuery::parse("label=env%3Dprod&sort=state&order=desc&page=0&junk=1");
        assert_eq!(query.page, 1, "page 0 is the first");
        assert_eq!(
            FleetQuery::parse(&query.to_query(query.sort, query.descending, 3)),
            FleetQuery { page: 3, ..query }
        );
    }

    #[test]
    fn sorting_orders_by_the_column_then_by_name_and_pages_hold_a_hundred() {
        let spokes: Vec<_> = (0..250)
            .map(|i| spoke(&format!("s{i:03}"), json!({})))
            .collect();
        let mut model = model_with(&spokes);
        model.observe(
            "hub",
            Observed::Cluster(watcher::Event::Apply(cluster("s200", "False"))),
            at(1),
        );
        let page = FleetQuery::parse("sort=available").select(&model);
        assert_eq!(names(&page)[0], "s200", "False sorts before True");
        assert_eq!((page.matched, page.pages, page.rows.len()), (250, 3, 100));
        let last = FleetQuery::parse("page=9").select(&model);
        assert_eq!((last.page, last.first, last.rows.len()), (3, 200, 50));
        let descending = FleetQuery::parse("order=desc").select(&model);
        assert_eq!(names(&descending)[0], "s249");
    }
}
