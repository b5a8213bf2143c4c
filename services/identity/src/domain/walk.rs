//! MoltNet's relation walk (compat §10): an undirected breadth-first walk over entry
//! relations from one entry, used by `expand=relations` and by relation lists with
//! depth > 1. Pure: the caller supplies how to fetch the relations touching a set of
//! entry ids (one query per level).

use std::collections::{HashMap, HashSet};
use std::future::Future;

use crate::domain::relation::Relation;
use crate::error::IdentityError;

pub const MAX_DEPTH: u32 = 3;

/// GetEntry's `expand`: nothing or `relations` (the gateway then walks them).
pub fn validate_expand(expand: &str) -> Result<(), IdentityError> {
    if matches!(expand, "" | "relations") {
        Ok(())
    } else {
        Err(IdentityError::InvalidArgument(format!(
            "expand {expand:?} is not one of relations"
        )))
    }
}

/// `depth` for a walk: unset = 1; otherwise 1-3.
pub fn validate_depth(depth: Option<u32>) -> Result<u32, IdentityError> {
    match depth {
        None => Ok(1),
        Some(d) if (1..=MAX_DEPTH).contains(&d) => Ok(d),
        Some(_) => Err(IdentityError::InvalidArgument(
            "depth must be an integer from 1 to 3".into(),
        )),
    }
}

/// A relation found by the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    pub relation: Relation,
    /// 1 = touches the starting entry.
    pub depth: u32,
    /// The relation that brought this relation's known end into the walk (None at depth 1).
    pub parent_relation_id: Option<String>,
}

/// The walk's result: relations by depth, each level in the fetch's order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WalkResult {
    pub items: Vec<Walked>,
    /// Largest depth returned, 0 when there are none.
    pub max_depth: u32,
}

/// Walks from `start` up to `depth` levels. At level d, `fetch(frontier)` returns every
/// relation with either end in the frontier (already status-filtered and ordered by the
/// caller); each relation is recorded once, at the first level it appears, with the
/// relation that introduced its known end as parent. The known end is the source when
/// the source is in the frontier, else the target (a relation between two frontier
/// entries counts from its source). Far ends not seen before form the next frontier,
/// introduced by the first relation (in fetch order) that reached them.
pub async fn walk<F, Fut, E>(start: &str, depth: u32, mut fetch: F) -> Result<WalkResult, E>
where
    F: FnMut(Vec<String>) -> Fut,
    Fut: Future<Output = Result<Vec<Relation>, E>>,
{
    let mut introduced_by: HashMap<String, Option<String>> = HashMap::new();
    introduced_by.insert(start.to_owned(), None);
    let mut frontier: Vec<String> = vec![start.to_owned()];
    let mut recorded: HashSet<String> = HashSet::new();
    let mut result = WalkResult::default();
    for d in 1..=depth.min(MAX_DEPTH) {
        if frontier.is_empty() {
            break;
        }
        let in_frontier: HashSet<&str> = frontier.iter().map(String::as_str).collect();
        let relations = fetch(frontier.clone()).await?;
        let mut next: Vec<String> = Vec::new();
        let mut found: Vec<Walked> = Vec::new();
        for r in relations {
            if recorded.contains(&r.id) {
                continue;
            }
            let (known, far) = if in_frontier.contains(r.source_id.as_str()) {
                (r.source_id.clone(), r.target_id.clone())
            } else if in_frontier.contains(r.target_id.as_str()) {
                (r.target_id.clone(), r.source_id.clone())
            } else {
                // Not touching the frontier: the fetch returned more than asked; skip.
                continue;
            };
            recorded.insert(r.id.clone());
            let parent = introduced_by.get(&known).cloned().flatten();
            if !introduced_by.contains_key(&far) {
                introduced_by.insert(far.clone(), Some(r.id.clone()));
                next.push(far);
            }
            found.push(Walked {
                relation: r,
                depth: d,
                parent_relation_id: parent,
            });
        }
        if !found.is_empty() {
            result.max_depth = d;
        }
        result.items.extend(found);
        frontier = next;
    }
    Ok(result)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use time::OffsetDateTime;

    use super::*;

    fn rel(id: &str, source: &str, target: &str, status: &str) -> Relation {
        Relation {
            id: id.into(),
            source_id: source.into(),
            target_id: target.into(),
            relation: "references".into(),
            status: status.into(),
            source_cid_snapshot: None,
            target_cid_snapshot: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    /// Walks over an in-memory edge list (in its order), counting fetches.
    async fn run(
        edges: &[Relation],
        start: &str,
        depth: u32,
        status: Option<&str>,
    ) -> (Vec<(String, u32, Option<String>)>, u32, usize) {
        let mut fetches = 0;
        let result = walk(start, depth, |frontier: Vec<String>| {
            fetches += 1;
            let found: Vec<Relation> = edges
                .iter()
                .filter(|r| frontier.contains(&r.source_id) || frontier.contains(&r.target_id))
                .filter(|r| status.is_none_or(|s| r.status == s))
                .cloned()
                .collect();
            std::future::ready(Ok::<_, IdentityError>(found))
        })
        .await
        .unwrap();
        let items = result
            .items
            .into_iter()
            .map(|w| (w.relation.id, w.depth, w.parent_relation_id))
            .collect();
        (items, result.max_depth, fetches)
    }

    fn item(id: &str, depth: u32, parent: Option<&str>) -> (String, u32, Option<String>) {
        (id.into(), depth, parent.map(str::to_owned))
    }

    #[test]
    fn depth_bounds() {
        assert_eq!(validate_depth(None).ok(), Some(1));
        assert_eq!(validate_depth(Some(3)).ok(), Some(3));
        assert!(validate_depth(Some(0)).is_err());
        assert!(validate_depth(Some(4)).is_err());
    }

    #[tokio::test]
    async fn chain_with_cut_off() {
        let edges = [
            rel("ab", "A", "B", "accepted"),
            rel("bc", "B", "C", "accepted"),
            rel("dc", "D", "C", "accepted"),
            rel("de", "D", "E", "accepted"),
        ];
        let (items, max, _) = run(&edges, "A", 3, None).await;
        assert_eq!(
            items,
            [
                item("ab", 1, None),
                item("bc", 2, Some("ab")),
                item("dc", 3, Some("bc")),
            ]
        );
        assert_eq!(max, 3);
        let (items, max, fetches) = run(&edges, "A", 1, None).await;
        assert_eq!(items, [item("ab", 1, None)]);
        assert_eq!((max, fetches), (1, 1));
        // Walking from the middle goes both ways.
        let (items, _, _) = run(&edges, "C", 2, None).await;
        assert_eq!(
            items,
            [
                item("bc", 1, None),
                item("dc", 1, None),
                item("ab", 2, Some("bc")),
                item("de", 2, Some("dc")),
            ]
        );
    }

    #[tokio::test]
    async fn cycle_records_each_relation_once() {
        let edges = [
            rel("ab", "A", "B", "accepted"),
            rel("bc", "B", "C", "accepted"),
            rel("ca", "C", "A", "accepted"),
        ];
        let (items, max, fetches) = run(&edges, "A", 3, None).await;
        assert_eq!(
            items,
            [
                item("ab", 1, None),
                item("ca", 1, None),
                item("bc", 2, Some("ab")),
            ]
        );
        // Level 3 has an empty frontier: no fetch.
        assert_eq!((max, fetches), (2, 2));
    }

    #[tokio::test]
    async fn diamond() {
        let edges = [
            rel("ab", "A", "B", "accepted"),
            rel("ac", "A", "C", "accepted"),
            rel("bd", "B", "D", "accepted"),
            rel("cd", "C", "D", "accepted"),
            rel("bc", "B", "C", "accepted"),
            rel("de", "D", "E", "accepted"),
        ];
        let (items, max, _) = run(&edges, "A", 3, None).await;
        assert_eq!(
            items,
            [
                item("ab", 1, None),
                item("ac", 1, None),
                item("bd", 2, Some("ab")),
                item("cd", 2, Some("ac")),
                // Between two frontier entries: once, from its source.
                item("bc", 2, Some("ab")),
                // D was reached first through bd.
                item("de", 3, Some("bd")),
            ]
        );
        assert_eq!(max, 3);
    }

    #[tokio::test]
    async fn status_filter_and_empty() {
        let edges = [
            rel("ab", "A", "B", "accepted"),
            rel("ac", "A", "C", "proposed"),
            rel("cd", "C", "D", "accepted"),
            rel("bd", "B", "E", "proposed"),
        ];
        let (items, max, _) = run(&edges, "A", 3, Some("accepted")).await;
        assert_eq!(items, [item("ab", 1, None)]);
        assert_eq!(max, 1);
        let (items, max, _) = run(&edges, "Z", 3, None).await;
        assert!(items.is_empty());
        assert_eq!(max, 0);
        let (items, max, _) = run(&edges, "A", 3, Some("rejected")).await;
        assert!(items.is_empty());
        assert_eq!(max, 0);
    }
}
