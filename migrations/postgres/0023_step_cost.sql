-- What a step's priced model calls cost, in billionths of a dollar
-- (`cairn_core::Usd`; its children's included, as its tokens are), written
-- with its tokens by the step's commit. NULL: nothing was priced.
ALTER TABLE steps ADD COLUMN cost_nanos BIGINT;
