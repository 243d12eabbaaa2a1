-- stack_node: one node of the call-stack trie with its frame.
SELECT s.parent_id, s.frame_id, f.ip, f.function, f.file, f.line, f.inline_depth
  FROM stacks s JOIN frames f ON f.id = s.frame_id
 WHERE s.id = :id;
