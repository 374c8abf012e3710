//! The in-memory task store: one process's tasks, lost when it stops (a server with replicas
//! keeps its tasks in a store they share).

use std::collections::HashMap;
use std::sync::Mutex;

use super::{StoreFuture, TaskOwner, TaskRecord, TaskState, TaskStore};

/// Tasks in a map, each dropped once its time to live ran out (swept when tasks are created,
/// so the map holds no more than the tasks created within one time to live).
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    tasks: Mutex<HashMap<String, TaskRecord>>,
}

impl MemoryTaskStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryTaskStore::default()
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, TaskRecord>> {
        // Records are replaced whole: a panic elsewhere cannot leave one half-written.
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TaskStore for MemoryTaskStore {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> StoreFuture<'a, ()> {
        let mut tasks = self.tasks();
        tasks.retain(|_, kept| !kept.expired(task.created_ms));
        tasks.insert(task.id.clone(), task.clone());
        Box::pin(std::future::ready(Ok(())))
    }

    fn get<'a>(
        &'a self,
        owner: &'a TaskOwner,
        id: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<TaskRecord>> {
        let found = self
            .tasks()
            .get(id)
            .filter(|task| task.visible_to(owner, now_ms))
            .cloned();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn settle<'a>(
        &'a self,
        id: &'a str,
        state: &'a TaskState,
        now_ms: u64,
    ) -> StoreFuture<'a, bool> {
        let moved = match self.tasks().get_mut(id) {
            Some(task) if !task.state.is_terminal() => {
                task.state = state.clone();
                task.updated_ms = now_ms;
                true
            }
            _ => false,
        };
        Box::pin(std::future::ready(Ok(moved)))
    }

    fn renew<'a>(&'a self, id: &'a str, lease_ms: u64, now_ms: u64) -> StoreFuture<'a, bool> {
        let running = match self.tasks().get_mut(id) {
            Some(task) if !task.state.is_terminal() && !task.expired(now_ms) => {
                task.lease_ms = lease_ms;
                true
            }
            _ => false,
        };
        Box::pin(std::future::ready(Ok(running)))
    }

    fn count_live<'a>(&'a self, owner: &'a TaskOwner, now_ms: u64) -> StoreFuture<'a, usize> {
        let live = self
            .tasks()
            .values()
            .filter(|task| task.visible_to(owner, now_ms) && task.live(now_ms))
            .count();
        Box::pin(std::future::ready(Ok(live)))
    }

    fn list<'a>(&'a self, owner: &'a TaskOwner, now_ms: u64) -> StoreFuture<'a, Vec<TaskRecord>> {
        let mut own: Vec<TaskRecord> = self
            .tasks()
            .values()
            .filter(|task| task.visible_to(owner, now_ms))
            .cloned()
            .collect();
        own.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.id.cmp(&b.id)));
        Box::pin(std::future::ready(Ok(own)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::fixtures::{owner, record};

    #[tokio::test]
    async fn a_task_is_found_only_by_its_owner_and_only_within_its_ttl() {
        let store = MemoryTaskStore::new();
        let alice = owner(Some("acme"), Some("alice"));
        let task = record(alice.clone(), 10_000);
        store.create(&task).await.unwrap();
        assert_eq!(
            store.get(&alice, &task.id, 10_500).await.unwrap(),
            Some(task.clone())
        );
        // The same subject in another tenant, another subject in the same tenant, nobody.
        for other in [
            owner(Some("globex"), Some("alice")),
            owner(Some("acme"), Some("bob")),
            TaskOwner::default(),
        ] {
            assert_eq!(store.get(&other, &task.id, 10_500).await.unwrap(), None);
            assert!(store.list(&other, 10_500).await.unwrap().is_empty());
        }
        assert_eq!(store.get(&alice, &task.id, 11_000).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_terminal_task_does_not_move_and_lists_are_newest_first() {
        let store = MemoryTaskStore::new();
        let alice = owner(Some("acme"), Some("alice"));
        let (old, new) = (record(alice.clone(), 10_000), record(alice.clone(), 10_100));
        store.create(&old).await.unwrap();
        store.create(&new).await.unwrap();
        assert!(
            store
                .settle(&old.id, &TaskState::Cancelled, 10_200)
                .await
                .unwrap()
        );
        let late = TaskState::Completed(Default::default());
        assert!(!store.settle(&old.id, &late, 10_300).await.unwrap());
        let kept = store.get(&alice, &old.id, 10_400).await.unwrap().unwrap();
        assert_eq!(
            (kept.state, kept.updated_ms),
            (TaskState::Cancelled, 10_200)
        );
        let listed: Vec<String> = store
            .list(&alice, 10_400)
            .await
            .unwrap()
            .into_iter()
            .map(|task| task.id)
            .collect();
        assert_eq!(listed, [new.id.clone(), old.id.clone()]);
        // Creating a task sweeps those that expired.
        store.create(&record(alice.clone(), 20_000)).await.unwrap();
        assert_eq!(store.tasks().len(), 1);
    }
}
