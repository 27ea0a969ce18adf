//! The stored Nodes, each with a dense id, and the node names callers hand to Filter and Score
//! ([`NodeName`], [`AsNode`]).

use std::cell::Cell;

use super::shared::NodeStatuses;
use crate::model::Node;

/// The stored Nodes by name, each with a dense id that the per-node state indexes by
/// ([`super::Derived::node_pools`], a cycle's results): a Filter call looks its node's name up once,
/// or not at all when its caller remembers the id ([`NodeMemo`]). A node keeps its id while it
/// exists; a deleted node's id is handed out again. Names are compared with [`crate::hashing::bytes_eq`]
/// (a `HashTable` lets the lookup choose its comparison; a `HashMap<String, _>` compares with
/// `memcmp`, one byte per iteration in the wasm guests).
#[derive(Default)]
pub(crate) struct Nodes {
    /// The ids, found by the name of the node in `slots`.
    by_name: hashbrown::HashTable<u32>,
    /// By id: the node, or `None` for a free id.
    slots: Vec<Option<StoredNode>>,
    /// Ids of deleted nodes, to hand out again.
    free: Vec<u32>,
    /// Changes when a node is added (a replaced node keeps its id; a deleted node's id is free
    /// until an added node takes it): a [`NodeMemo`] of another generation is looked up again
    /// ([`Nodes::changed`]).
    generation: u64,
    /// The nodes' statuses, one copy of each ([`shared`]).
    statuses: NodeStatuses,
}

struct StoredNode {
    name: Box<str>,
    node: Box<Node>,
}

/// Where a [`NodeName`] was last found in the table of nodes: while no node is added, the next
/// call skips the name's lookup (a deleted node's id is free, which the memo reads as "not
/// found"). A new memo knows nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeMemo(Option<(u64, Option<u32>)>);

/// A node name that remembers where the plugin found it, for a caller that filters the same
/// names cycle after cycle (the component guest keeps one per entry of its table of node
/// indexes): Filter and Score skip the name's lookup while no node was added.
#[derive(Debug, Default)]
pub struct NodeName {
    name: Box<str>,
    memo: Cell<NodeMemo>,
}

impl NodeName {
    /// A name that knows nothing yet.
    pub fn new(name: impl Into<Box<str>>) -> NodeName {
        NodeName {
            name: name.into(),
            memo: Cell::default(),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

/// How a node is named to Filter and Score: by its name (`&str`, `String`), or by a
/// [`NodeName`], whose lookup is remembered.
#[derive(Clone, Copy, Debug)]
pub struct NodeRef<'a> {
    name: &'a str,
    memo: Option<&'a Cell<NodeMemo>>,
}

impl<'a> NodeRef<'a> {
    /// The name.
    pub fn name(&self) -> &'a str {
        self.name
    }
}

/// Something that names a node ([`NodeRef`]).
pub trait AsNode {
    /// The node it names.
    fn as_node(&self) -> NodeRef<'_>;
}

impl AsNode for str {
    fn as_node(&self) -> NodeRef<'_> {
        NodeRef {
            name: self,
            memo: None,
        }
    }
}

impl AsNode for String {
    fn as_node(&self) -> NodeRef<'_> {
        self.as_str().as_node()
    }
}

impl AsNode for NodeName {
    fn as_node(&self) -> NodeRef<'_> {
        NodeRef {
            name: &self.name,
            memo: Some(&self.memo),
        }
    }
}

impl<T: AsNode + ?Sized> AsNode for &T {
    fn as_node(&self) -> NodeRef<'_> {
        (**self).as_node()
    }
}

impl Nodes {
    fn hash(name: &str) -> u64 {
        use std::hash::BuildHasher;
        rustc_hash::FxBuildHasher.hash_one(name)
    }

    /// The id of the node named `name`.
    pub(crate) fn id(&self, name: &str) -> Option<u32> {
        let slots = &self.slots;
        self.by_name
            .find(Self::hash(name), |&id| slot_named(slots, id, name))
            .copied()
    }

    /// The node stored under `id`, with its id.
    pub(crate) fn by_id(&self, id: u32) -> Option<(u32, &Node)> {
        slot(&self.slots, id).map(|n| (id, &*n.node))
    }

    /// The node's id and object.
    pub(crate) fn get(&self, name: &str) -> Option<(u32, &Node)> {
        self.id(name).and_then(|id| self.by_id(id))
    }

    /// The id of the node `node` names, through its memo when it has one (refreshed when a node
    /// was added since).
    pub(crate) fn find(&self, node: NodeRef<'_>) -> Option<u32> {
        let Some(memo) = node.memo else {
            return self.id(node.name);
        };
        match memo.get().0 {
            Some((generation, id)) if generation == self.generation => id,
            _ => {
                let id = self.id(node.name);
                memo.set(NodeMemo(Some((self.generation, id))));
                id
            }
        }
    }

    /// Stores a node (replacing one of the same name, whose id it keeps) and returns its id.
    pub(crate) fn insert(&mut self, name: String, mut node: Box<Node>) -> u32 {
        self.statuses.share(&mut node.status);
        if let Some(id) = self.id(&name)
            && let Some(Some(slot)) = self.slots.get_mut(id as usize)
        {
            slot.node = node;
            return id;
        }
        // Without a free id, every id below the number of nodes is taken.
        let id = self
            .free
            .pop()
            .unwrap_or_else(|| u32::try_from(self.slots.len()).unwrap_or(u32::MAX));
        let stored = StoredNode {
            name: name.into_boxed_str(),
            node,
        };
        let hash = Self::hash(&stored.name);
        if self.slots.len() <= id as usize {
            self.slots.resize_with(id as usize + 1, || None);
        }
        self.slots[id as usize] = Some(stored);
        let slots = &self.slots;
        self.by_name
            .insert_unique(hash, id, |&i| Self::hash(slot(slots, i).map_or("", |n| &*n.name)));
        self.changed();
        id
    }

    /// Deletes a node; its id, if it existed.
    pub(crate) fn remove(&mut self, name: &str) -> Option<u32> {
        let slots = &self.slots;
        let entry = self
            .by_name
            .find_entry(Self::hash(name), |&id| slot_named(slots, id, name))
            .ok()?;
        let (id, _) = entry.remove();
        self.slots[id as usize] = None;
        // No new generation: a memo of this name finds the id free, which is "not found"; the
        // id's next node is an insert, which starts one.
        self.free.push(id);
        Some(id)
    }

    /// Records a change of the name-to-id mapping. Generations are unique in the process, so a
    /// memo made by another plugin (a guest configured again keeps its table of node indexes)
    /// never matches; 0 is the generation of a table that never changed, which holds no node.
    fn changed(&mut self) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        self.generation = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The names of the stored nodes (in no order).
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().flatten().map(|n| &*n.name)
    }

    /// One more than the highest id in use (ids are dense: deleted nodes' ids are reused).
    pub(crate) fn id_bound(&self) -> usize {
        self.slots.len()
    }
}

/// The node stored under `id` in [`Nodes::slots`] (free functions over the slots, so that the
/// name table's closures can borrow the slots while the table itself is borrowed mutably).
fn slot(slots: &[Option<StoredNode>], id: u32) -> Option<&StoredNode> {
    slots.get(id as usize).and_then(Option::as_ref)
}

/// Whether the node stored under `id` is named `name`.
fn slot_named(slots: &[Option<StoredNode>], id: u32, name: &str) -> bool {
    slot(slots, id).is_some_and(|n| crate::hashing::bytes_eq(n.name.as_bytes(), name.as_bytes()))
}
