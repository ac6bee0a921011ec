//! Allocation of idempotent-producer ids that are never handed out twice,
//! even across restarts: ids are reserved in blocks, and a block's end is
//! persisted before any id from it is given out.

/// Ids reserved by one durable write.
pub const BLOCK_SIZE: i64 = 1000;

/// In-memory allocator state; the caller persists the high mark.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    next: i64,
    high_mark: i64,
}

impl ProducerIdAllocator {
    /// Resumes after `persisted_high_mark`: ids below it may have been used.
    pub fn new(persisted_high_mark: i64) -> Self {
        Self {
            next: persisted_high_mark,
            high_mark: persisted_high_mark,
        }
    }

    /// The next id, calling `persist(new_high_mark)` first whenever a new
    /// block must be reserved. If persisting fails, no id is handed out.
    pub fn allocate<E>(&mut self, persist: impl FnOnce(i64) -> Result<(), E>) -> Result<i64, E> {
        if self.next >= self.high_mark {
            let new_mark = self.next + BLOCK_SIZE;
            persist(new_mark)?;
            self.high_mark = new_mark;
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }

    /// True if `id` was handed out by this allocator (now or before a restart).
    pub fn was_issued(&self, id: i64) -> bool {
        (0..self.next).contains(&id) || (0..self.high_mark).contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persists_a_block_before_handing_out_its_first_id() {
        let mut persisted = Vec::new();
        let mut a = ProducerIdAllocator::new(0);
        for expected in 0..3 {
            let id = a.allocate(|m| {
                persisted.push(m);
                Ok::<_, ()>(())
            });
            assert_eq!(id, Ok(expected));
        }
        assert_eq!(persisted, vec![BLOCK_SIZE]);
    }

    #[test]
    fn restart_resumes_after_the_persisted_mark() {
        let mut a = ProducerIdAllocator::new(2000);
        assert_eq!(a.allocate(|_| Ok::<_, ()>(())), Ok(2000));
        assert!(a.was_issued(10));
    }

    #[test]
    fn failed_persist_hands_out_nothing() {
        let mut a = ProducerIdAllocator::new(0);
        assert_eq!(a.allocate(|_| Err("disk full")), Err("disk full"));
        assert_eq!(a.allocate(|_| Ok::<_, &str>(())), Ok(0));
    }
}
