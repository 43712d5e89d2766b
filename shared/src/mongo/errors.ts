/** MongoDB's duplicate-key error (E11000): a unique insert that found its `_id` (or unique key) taken. */
const DUPLICATE_KEY = 11000;

/** Whether `err` is a duplicate-key refusal: the claim, reservation or slot was taken by another writer. */
export function isDuplicateKey(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === DUPLICATE_KEY;
}
