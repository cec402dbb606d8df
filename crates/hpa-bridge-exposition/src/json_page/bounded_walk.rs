//! One pass over a JSON document that keeps only the values the configured paths name.
//!
//! Every scraped pod may be hostile, so the document is never built as a tree: building
//! `serde_json::Value` costs several times the body in memory, and a node that no path reaches
//! is worth nothing. The walk counts every value against `scrape.maxJsonNodes` and every
//! nesting level against `scrape.maxJsonDepth` as it reads them, checks the scrape's cancel
//! flag at each value, and keeps, per path, the one scalar it ends on. Paths are singular
//! (names and non-negative indices, `JsonPath::parse`), so a path follows one branch and the
//! work is one pass whatever the paths are.
//!
//! An object that names a key twice where a path goes through it is refused: RFC 8259 §4
//! leaves the meaning of such a document to each reader, so `{"workers": 10, "workers": 1}`
//! says 10 to one parser and 1 to another. A repeated key no path goes through changes nothing
//! read, and is not looked at (that would mean holding every key of the document).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{JsonPageError, Step};
use crate::Limits;

/// What a path ended on. Containers are kept as their kind only: a path is meant to end on a
/// value, and nothing read from a container could be used.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Found {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array,
    Object,
}

/// The walk's bounds.
pub(super) struct Budget<'a> {
    pub max_nodes: usize,
    pub max_depth: usize,
    pub cancel: Option<&'a AtomicBool>,
}

impl<'a> Budget<'a> {
    pub fn new(limits: &Limits, cancel: Option<&'a AtomicBool>) -> Self {
        Budget {
            max_nodes: limits.max_json_nodes,
            max_depth: limits.max_json_depth,
            cancel,
        }
    }
}

/// Read `body` once; `found[i]` is what `paths[i]` ended on, `None` where it matched nothing.
pub(super) fn walk(
    body: &[u8],
    paths: &[&[Step]],
    budget: &Budget,
) -> Result<Vec<Option<Found>>, JsonPageError> {
    let mut state = Walk {
        paths,
        found: vec![None; paths.len()],
        nodes: 0,
        budget,
        stopped: None,
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let read = Node {
        walk: &mut state,
        active: (0..paths.len()).collect(),
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match (read, state.stopped) {
        (_, Some(stopped)) => Err(stopped),
        (Err(e), None) => Err(JsonPageError::NotJson(e.to_string())),
        (Ok(()), None) => Ok(state.found),
    }
}

struct Walk<'w> {
    paths: &'w [&'w [Step]],
    found: Vec<Option<Found>>,
    nodes: usize,
    budget: &'w Budget<'w>,
    /// Why the walk stopped when a bound, not the document's syntax, stopped it.
    stopped: Option<JsonPageError>,
}

impl Walk<'_> {
    /// Count one value at `depth`; an error stops the walk.
    fn enter<E: Error>(&mut self, depth: usize) -> Result<(), E> {
        self.nodes += 1;
        if self.nodes > self.budget.max_nodes {
            return Err(self.stop(JsonPageError::Limit(format!(
                "the document holds more than scrape.maxJsonNodes ({}) values",
                self.budget.max_nodes
            ))));
        }
        if depth > self.budget.max_depth {
            return Err(self.stop(JsonPageError::Limit(format!(
                "the document nests deeper than scrape.maxJsonDepth ({}) levels",
                self.budget.max_depth
            ))));
        }
        if self
            .budget
            .cancel
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(self.stop(JsonPageError::Cancelled));
        }
        Ok(())
    }

    fn stop<E: Error>(&mut self, why: JsonPageError) -> E {
        let e = E::custom(&why);
        self.stopped = Some(why);
        e
    }

    /// Record `found` for each active path that ends at this node.
    fn keep(&mut self, active: &[usize], depth: usize, found: impl Fn() -> Found) {
        for &p in active {
            if self.paths[p].len() == depth {
                self.found[p] = Some(found());
            }
        }
    }
}

/// One value of the document, at `depth` (the root is 0), with the paths that reached it.
struct Node<'s, 'w> {
    walk: &'s mut Walk<'w>,
    active: Vec<usize>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.walk.enter(self.depth)?;
        d.deserialize_any(self)
    }
}

impl Node<'_, '_> {
    fn scalar(self, found: impl Fn() -> Found) {
        self.walk.keep(&self.active, self.depth, found);
    }
}

/// The paths of `active` that go on from `depth` into a child, with the step they take next.
fn onward<'w, 'a>(
    paths: &'w [&'w [Step]],
    active: &'a [usize],
    depth: usize,
) -> impl Iterator<Item = (usize, &'w Step)> + use<'w, 'a> {
    active
        .iter()
        .filter_map(move |&p| paths[p].get(depth).map(|step| (p, step)))
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.scalar(|| Found::Bool(v));
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.scalar(|| Found::Number(v.into()));
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.scalar(|| Found::Number(v.into()));
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        // JSON text has no NaN or infinity; `Value` reads one as null too.
        self.scalar(|| serde_json::Number::from_f64(v).map_or(Found::Null, Found::Number));
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.scalar(|| Found::String(v.to_owned()));
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.scalar(|| Found::Null);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.walk.keep(&self.active, self.depth, || Found::Array);
        let onward: Vec<(usize, usize)> = onward(self.walk.paths, &self.active, self.depth)
            .filter_map(|(p, step)| match step {
                Step::Index(i) => Some((p, *i)),
                Step::Name(_) => None,
            })
            .collect();
        let depth = self.depth + 1;
        let mut index = 0;
        loop {
            let active = onward
                .iter()
                .filter(|(_, i)| *i == index)
                .map(|(p, _)| *p)
                .collect();
            let child = Node {
                walk: self.walk,
                active,
                depth,
            };
            if seq.next_element_seed(child)?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.walk.keep(&self.active, self.depth, || Found::Object);
        let onward: Vec<(usize, &str)> = onward(self.walk.paths, &self.active, self.depth)
            .filter_map(|(p, step)| match step {
                Step::Name(n) => Some((p, n.as_str())),
                Step::Index(_) => None,
            })
            .collect();
        let depth = self.depth + 1;
        if onward.is_empty() {
            while map.next_key::<IgnoredAny>()?.is_some() {
                map.next_value_seed(Node {
                    walk: self.walk,
                    active: Vec::new(),
                    depth,
                })?;
            }
            return Ok(());
        }
        // The keys some path goes through that this object has named so far.
        let mut named: Vec<&str> = Vec::new();
        while let Some(key) = map.next_key_seed(Key(&onward))? {
            if let Some(key) = key {
                if named.contains(&key) {
                    return Err(A::Error::custom(format!(
                        "the key {key:?} appears twice in one object, so its value is ambiguous"
                    )));
                }
                named.push(key);
            }
            let active = match key {
                Some(key) => onward
                    .iter()
                    .filter(|(_, name)| *name == key)
                    .map(|(p, _)| *p)
                    .collect(),
                None => Vec::new(),
            };
            map.next_value_seed(Node {
                walk: self.walk,
                active,
                depth,
            })?;
        }
        Ok(())
    }
}

/// An object's key, as the name some path takes next, or `None` when no path takes it.
struct Key<'o, 'p>(&'o [(usize, &'p str)]);

impl<'de, 'p> DeserializeSeed<'de> for Key<'_, 'p> {
    type Value = Option<&'p str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, 'p> Visitor<'de> for Key<'_, 'p> {
    type Value = Option<&'p str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().find(|(_, name)| *name == v).map(|(_, n)| *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(text: &str) -> Vec<Step> {
        super::super::JsonPath::parse(text).unwrap().steps
    }

    fn run(
        body: &str,
        paths: &[&str],
        limits: &Limits,
    ) -> Result<Vec<Option<Found>>, JsonPageError> {
        let owned: Vec<Vec<Step>> = paths.iter().map(|p| steps(p)).collect();
        let refs: Vec<&[Step]> = owned.iter().map(Vec::as_slice).collect();
        walk(body.as_bytes(), &refs, &Budget::new(limits, None))
    }

    #[test]
    fn each_path_keeps_the_one_value_it_ends_on() {
        let doc = r#"{"a": 1, "b": [true, null, -2, 1.5e3, "x\u00e9"], "c": {"d": {}}, "e": [], "n": 18446744073709551615}"#;
        let got = run(
            doc,
            &[
                "$.a",
                "$.b[0]",
                "$.b[1]",
                "$.b[2]",
                "$.b[3]",
                "$['b'][4]",
                "$.c",
                "$.c.d.x",
                "$.e",
                "$.n",
                "$.b[9]",
                "$",
            ],
            &Limits::DEFAULT,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                Some(Found::Number(1.into())),
                Some(Found::Bool(true)),
                Some(Found::Null),
                Some(Found::Number((-2).into())),
                Some(Found::Number(serde_json::Number::from_f64(1500.0).unwrap())),
                Some(Found::String("x\u{e9}".into())),
                Some(Found::Object),
                None,
                Some(Found::Array),
                Some(Found::Number(u64::MAX.into())),
                None,
                Some(Found::Object),
            ]
        );
    }

    #[test]
    fn a_key_repeated_on_a_path_is_refused_and_elsewhere_ignored() {
        for doc in [
            r#"{"workers": 10, "workers": 1}"#,
            r#"{"a": {"b": 1, "c": 2, "b": 3}}"#,
            r#"{"a": {"b": 1}, "a": {"c": 2}}"#,
        ] {
            let e = run(doc, &["$.workers", "$.a.b"], &Limits::DEFAULT).unwrap_err();
            assert!(e.to_string().contains("appears twice"), "{doc}: {e}");
        }
        let got = run(
            r#"{"x": 1, "x": 2, "workers": 3}"#,
            &["$.workers"],
            &Limits::DEFAULT,
        );
        assert_eq!(got.unwrap(), vec![Some(Found::Number(3.into()))]);
    }

    #[test]
    fn the_budget_counts_every_value_and_level_while_reading() {
        let limits = Limits {
            max_json_nodes: 10,
            max_json_depth: 3,
            ..Limits::DEFAULT
        };
        // Ten values (the array and nine numbers) fit; eleven do not, wherever they are.
        assert!(run("[1,2,3,4,5,6,7,8,9]", &["$[0]"], &limits).is_ok());
        let e = run("[1,2,3,4,5,6,7,8,9,10]", &["$[0]"], &limits).unwrap_err();
        assert!(e.is_limit(), "{e}");
        assert_eq!(
            e.to_string(),
            "the document holds more than scrape.maxJsonNodes (10) values"
        );
        // A value's depth is the containers around it: here 3, then 4.
        assert!(run(r#"{"a":[[1]]}"#, &["$.a"], &limits).is_ok());
        let e = run(r#"{"a":[[[1]]]}"#, &["$.a"], &limits).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the document nests deeper than scrape.maxJsonDepth (3) levels"
        );
        // Syntax errors stay syntax errors.
        let e = run("[1,", &["$[0]"], &limits).unwrap_err();
        assert!(e.to_string().starts_with("body is not JSON: "), "{e}");
        // Trailing bytes after the document are not JSON either.
        let e = run("1 2", &["$"], &limits).unwrap_err();
        assert!(e.to_string().starts_with("body is not JSON: "), "{e}");
    }

    #[test]
    fn a_set_cancel_flag_stops_the_walk_at_the_next_value() {
        let flag = AtomicBool::new(true);
        let owned = steps("$.a");
        let budget = Budget::new(&Limits::DEFAULT, Some(&flag));
        let e = walk(br#"{"a": 1}"#, &[owned.as_slice()], &budget).unwrap_err();
        assert_eq!(e, JsonPageError::Cancelled);
    }
}
