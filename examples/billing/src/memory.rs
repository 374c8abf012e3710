//! The store of `billing --in-memory`: the invoices of the SQLite [`Store`](crate::Store) kept
//! in a map, with the same seed, tenancy, numbering, idempotency keys and audit trail, and
//! neither SQLite nor the blocking pool. Every call holds one mutex for a few map lookups, so
//! handlers call it directly on the async workers. Gone when the process stops.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard, PoisonError};

use fusion::Hidden;
use fusion::audit::AuditRecord;

use crate::model::{Invoice, Status};
use crate::store::{
    ALL_STATUSES, Created, InvoicePage, NewInvoice, SEED_INVOICES, SEED_TENANT, VoidOutcome,
    seed_invoice,
};

/// Invoices and audit trail in memory: `Send + Sync`, shared behind an `Arc`.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Ledgers>,
}

/// Everything behind the store's one lock: a change and its audit record are one step.
#[derive(Debug, Default)]
struct Ledgers {
    tenants: HashMap<String, Ledger>,
    /// The append-only audit trail of changes (what SQLite keeps in `audit_events`).
    audit: Vec<AuditRecord>,
}

/// One tenant's invoices.
#[derive(Debug, Default)]
struct Ledger {
    /// Invoice `INV-n` at index `n - 1`: numbers are per tenant, consecutive, and an invoice is
    /// never deleted. Shared with the answers that show them: a get or a page hands out the
    /// records without copying them (and their hidden fields).
    invoices: Vec<Arc<Invoice>>,
    /// How many invoices have each status, in [`ALL_STATUSES`] order: a page's total without
    /// counting.
    counts: [u64; 3],
    /// `key → (digest of the request, invoice id)` of creates sent with an idempotency key.
    keys: HashMap<String, (String, String)>,
}

impl Ledger {
    /// Where invoice `id` is in `invoices`, if the tenant has it.
    fn index(&self, id: &str) -> Option<usize> {
        let number: usize = id.strip_prefix("INV-")?.parse().ok()?;
        let index = number.checked_sub(1)?;
        // `INV-07` parses as 7 but is not `INV-7`.
        (self.invoices.get(index)?.id == id).then_some(index)
    }

    fn get(&self, id: &str) -> Option<&Arc<Invoice>> {
        self.invoices.get(self.index(id)?)
    }

    /// Invoice `id` to change: copied first only while an answer still holds it.
    fn get_mut(&mut self, id: &str) -> Option<&mut Invoice> {
        let index = self.index(id)?;
        self.invoices.get_mut(index).map(Arc::make_mut)
    }

    fn push(&mut self, invoice: Invoice) {
        self.counts[slot(invoice.status)] += 1;
        self.invoices.push(Arc::new(invoice));
    }

    fn count(&self, status: Option<Status>) -> u64 {
        match status {
            None => self.invoices.len() as u64,
            Some(status) => self.counts[slot(status)],
        }
    }
}

/// The index of `status` in [`ALL_STATUSES`].
fn slot(status: Status) -> usize {
    match status {
        Status::Open => 0,
        Status::Paid => 1,
        Status::Voided => 2,
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// A store seeded like a new SQLite [`Store`](crate::Store): invoices `INV-1` to
    /// `INV-1000` of tenant `t_777`.
    pub fn new() -> MemoryStore {
        let mut ledger = Ledger::default();
        for n in 1..=SEED_INVOICES {
            ledger.push(seed_invoice(n));
        }
        MemoryStore {
            inner: Mutex::new(Ledgers {
                tenants: HashMap::from([(SEED_TENANT.to_owned(), ledger)]),
                audit: Vec::new(),
            }),
        }
    }

    /// The store, even after a panic while it was held: every change is complete before any
    /// of it is written, so a panic never leaves half of one behind.
    fn lock(&self) -> MutexGuard<'_, Ledgers> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tenant's invoice `id`, or `None` if the tenant has no such invoice.
    pub fn get(&self, tenant: &str, id: &str) -> Option<Arc<Invoice>> {
        self.lock().tenants.get(tenant)?.get(id).cloned()
    }

    /// At most `limit` of the tenant's invoices with `status` (any when `None`) after the
    /// first `offset`, in invoice number order, with their total (kept, never counted).
    pub fn page(
        &self,
        tenant: &str,
        status: Option<Status>,
        offset: usize,
        limit: usize,
    ) -> InvoicePage {
        let ledgers = self.lock();
        let Some(ledger) = ledgers.tenants.get(tenant) else {
            return InvoicePage::counted(Vec::new(), 0, offset);
        };
        let invoices = ledger
            .invoices
            .iter()
            .filter(|invoice| status.is_none_or(|status| invoice.status == status))
            .skip(offset)
            .take(limit)
            .cloned()
            .collect();
        InvoicePage::counted(invoices, ledger.count(status), offset)
    }

    /// Voids the tenant's invoice `id` with its audit record; see
    /// [`Store::void`](crate::Store::void).
    pub fn void(&self, tenant: &str, id: &str, audit: &AuditRecord) -> VoidOutcome {
        let mut ledgers = self.lock();
        let Ledgers {
            tenants,
            audit: trail,
        } = &mut *ledgers;
        let Some(ledger) = tenants.get_mut(tenant) else {
            return VoidOutcome::NotFound;
        };
        let Some(invoice) = ledger.get_mut(id) else {
            return VoidOutcome::NotFound;
        };
        if invoice.status == Status::Voided {
            return VoidOutcome::AlreadyVoided(invoice.clone());
        }
        let before = invoice.status;
        invoice.status = Status::Voided;
        let voided = invoice.clone();
        ledger.counts[slot(before)] -= 1;
        ledger.counts[slot(Status::Voided)] += 1;
        trail.push(audit.clone());
        VoidOutcome::Voided(voided)
    }

    /// Creates an open invoice for the tenant with its audit record; an idempotency key the
    /// tenant used before replays its invoice or is refused, as in
    /// [`Store::create`](crate::Store::create).
    pub fn create(&self, tenant: &str, new: &NewInvoice<'_>, audit: &AuditRecord) -> Created {
        let request = new
            .idempotency_key
            .map(|_| crate::store::create_request_digest(new));
        let mut ledgers = self.lock();
        let Ledgers {
            tenants,
            audit: trail,
        } = &mut *ledgers;
        let ledger = tenants.entry(tenant.to_owned()).or_default();
        if let (Some(key), Some(request)) = (new.idempotency_key, &request)
            && let Some((earlier, invoice_id)) = ledger.keys.get(key)
        {
            if earlier != request {
                return Created::KeyReused;
            }
            let Some(invoice) = ledger
                .get(invoice_id)
                .map(|invoice| Invoice::clone(invoice))
            else {
                // A kept key always names an invoice of its tenant, and none is ever deleted.
                return Created::KeyReused;
            };
            let mut replayed = audit.clone();
            replayed.outcome = "ok_replayed";
            trail.push(replayed);
            return Created::Replayed(invoice);
        }
        let invoice = Invoice {
            id: format!("INV-{}", ledger.invoices.len() + 1),
            customer_id: new.customer_id.to_owned(),
            total_cents: new.total_cents,
            status: Status::Open,
            tenant_id: Hidden::new(tenant.to_owned()),
            webhook_secret: Hidden::new(format!("whsec_{}", uuid::Uuid::new_v4().simple())),
            internal_flags: Hidden::new(String::new()),
        };
        if let (Some(key), Some(request)) = (new.idempotency_key, request) {
            ledger
                .keys
                .insert(key.to_owned(), (request, invoice.id.clone()));
        }
        ledger.push(invoice.clone());
        trail.push(audit.clone());
        Created::New(invoice)
    }

    /// Sets the total of the tenant's open invoice `id` with its audit record; `None` when the
    /// tenant has no open invoice with that id.
    pub fn set_total(
        &self,
        tenant: &str,
        id: &str,
        total_cents: i64,
        audit: &AuditRecord,
    ) -> Option<Invoice> {
        let mut ledgers = self.lock();
        let Ledgers {
            tenants,
            audit: trail,
        } = &mut *ledgers;
        let invoice = tenants
            .get_mut(tenant)?
            .get_mut(id)
            .filter(|invoice| invoice.status == Status::Open)?;
        invoice.total_cents = total_cents;
        let changed = invoice.clone();
        trail.push(audit.clone());
        Some(changed)
    }

    /// For each status, how many of the tenant's invoices have it and their total in cents:
    /// always three entries, open, paid, voided.
    pub fn totals_by_status(&self, tenant: &str) -> Vec<(Status, u64, i64)> {
        let mut totals: Vec<(Status, u64, i64)> =
            ALL_STATUSES.iter().map(|&status| (status, 0, 0)).collect();
        if let Some(ledger) = self.lock().tenants.get(tenant) {
            for invoice in &ledger.invoices {
                let total = &mut totals[slot(invoice.status)];
                total.1 += 1;
                total.2 += invoice.total_cents;
            }
        }
        totals
    }

    /// At most `limit` of the tenant's invoice ids that start with `prefix` (case-sensitive),
    /// in invoice number order.
    pub fn ids_with_prefix(&self, tenant: &str, prefix: &str, limit: usize) -> Vec<String> {
        self.lock()
            .tenants
            .get(tenant)
            .map(|ledger| {
                ledger
                    .invoices
                    .iter()
                    .filter(|invoice| invoice.id.starts_with(prefix))
                    .take(limit)
                    .map(|invoice| invoice.id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The audit records of every change so far, oldest first.
    pub fn audit_trail(&self) -> Vec<AuditRecord> {
        self.lock().audit.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn audit(action: &str) -> AuditRecord {
        AuditRecord {
            at: SystemTime::now(),
            tool: action.to_owned(),
            action: action.to_owned(),
            principal: None,
            tenant: None,
            arguments_digest: String::new(),
            outcome: "ok",
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn the_seed_is_the_sqlite_stores() {
        let store = MemoryStore::new();
        let page = store.page(SEED_TENANT, None, 0, 3);
        let ids: Vec<&str> = page
            .invoices
            .iter()
            .map(|invoice| invoice.id.as_str())
            .collect();
        assert_eq!(ids, ["INV-1", "INV-2", "INV-3"]);
        assert_eq!(page.total, Some(1000));
        assert_eq!(
            store.get(SEED_TENANT, "INV-7").as_deref(),
            Some(&seed_invoice(7))
        );
        assert_eq!(
            store.page(SEED_TENANT, Some(Status::Open), 0, 1).total,
            Some(333)
        );
    }

    #[test]
    fn answers_share_the_stored_record_and_keep_it_as_it_was_when_it_changes() {
        let store = MemoryStore::new();
        let open = (1..)
            .map(|n| format!("INV-{n}"))
            .find(|id| store.get(SEED_TENANT, id).unwrap().status == Status::Open)
            .unwrap();
        let got = store.get(SEED_TENANT, &open).unwrap();
        let paged = store.page(SEED_TENANT, Some(Status::Open), 0, 1);
        // Not copied: the get and the page hold the store's own record.
        assert!(Arc::ptr_eq(&got, &paged.invoices[0]));
        assert!(Arc::ptr_eq(&got, &store.get(SEED_TENANT, &open).unwrap()));
        let VoidOutcome::Voided(voided) = store.void(SEED_TENANT, &open, &audit("void")) else {
            panic!("an open invoice is voided");
        };
        assert_eq!(voided.status, Status::Voided);
        // The answer already given still shows what was true when it was given.
        assert_eq!(got.status, Status::Open);
        let now = store.get(SEED_TENANT, &open).unwrap();
        assert_eq!(now.status, Status::Voided);
        assert!(!Arc::ptr_eq(&got, &now));
    }

    #[test]
    fn tenants_see_only_their_own_invoices() {
        let store = MemoryStore::new();
        assert_eq!(store.get("t_other", "INV-1"), None);
        assert_eq!(store.get(SEED_TENANT, "INV-01"), None);
        assert_eq!(store.get(SEED_TENANT, "INV-0"), None);
        let new = NewInvoice {
            customer_id: "C-1",
            total_cents: 5,
            idempotency_key: None,
        };
        let Created::New(first) = store.create("t_other", &new, &audit("create")) else {
            panic!("a new invoice");
        };
        assert_eq!(first.id, "INV-1", "numbers are per tenant");
        assert_eq!(
            store.void("t_other", "INV-2", &audit("void")),
            VoidOutcome::NotFound
        );
        assert_eq!(store.page("t_other", None, 0, 10).total, Some(1));
        assert_eq!(store.page("t_none", None, 0, 10).invoices, []);
        assert_eq!(store.ids_with_prefix("t_other", "INV-", 10), ["INV-1"]);
        assert_eq!(
            store.totals_by_status("t_other"),
            [
                (Status::Open, 1, 5),
                (Status::Paid, 0, 0),
                (Status::Voided, 0, 0)
            ]
        );
    }

    #[test]
    fn void_and_set_total_change_what_they_may_with_their_audit_records() {
        let store = MemoryStore::new();
        // INV-1 is paid, INV-3 open, INV-2 voided by the seed.
        assert!(matches!(
            store.void(SEED_TENANT, "INV-1", &audit("void")),
            VoidOutcome::Voided(invoice) if invoice.status == Status::Voided
        ));
        assert!(matches!(
            store.void(SEED_TENANT, "INV-1", &audit("void")),
            VoidOutcome::AlreadyVoided(_)
        ));
        // 334 paid invoices in the seed, one of them voided now.
        assert_eq!(
            store.page(SEED_TENANT, Some(Status::Paid), 0, 0).total,
            Some(333)
        );
        assert_eq!(
            store.set_total(SEED_TENANT, "INV-1", 1, &audit("update")),
            None
        );
        let changed = store.set_total(SEED_TENANT, "INV-3", 42, &audit("update"));
        assert_eq!(changed.map(|invoice| invoice.total_cents), Some(42));
        let actions: Vec<String> = store
            .audit_trail()
            .into_iter()
            .map(|record| record.action)
            .collect();
        assert_eq!(
            actions,
            ["void", "update"],
            "one record per change, none otherwise"
        );
    }

    #[test]
    fn an_idempotency_key_replays_its_invoice_or_refuses_another_request() {
        let store = MemoryStore::new();
        let new = NewInvoice {
            customer_id: "C-9",
            total_cents: 900,
            idempotency_key: Some("k-1"),
        };
        let Created::New(created) = store.create(SEED_TENANT, &new, &audit("create")) else {
            panic!("a new invoice");
        };
        assert_eq!(created.id, "INV-1001");
        assert_eq!(
            store.create(SEED_TENANT, &new, &audit("create")),
            Created::Replayed(created)
        );
        let other = NewInvoice {
            total_cents: 901,
            ..new
        };
        assert_eq!(
            store.create(SEED_TENANT, &other, &audit("create")),
            Created::KeyReused
        );
        let outcomes: Vec<&str> = store
            .audit_trail()
            .iter()
            .map(|record| record.outcome)
            .collect();
        assert_eq!(outcomes, ["ok", "ok_replayed"]);
        assert_eq!(store.page(SEED_TENANT, None, 0, 0).total, Some(1001));
    }
}
