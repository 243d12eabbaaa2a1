-- stack_kinds: the stacks whose allocations are not heap blocks, with their
-- kind (schema.sql allocations.kind): read whole from the partial index
-- allocations_kind, which holds only those rows.
SELECT DISTINCT kind, stack_id FROM allocations WHERE kind <> 0;
