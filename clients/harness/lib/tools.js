// The governor's tools for the Harness agent, under the names of the original in-process plugin
// (and of `governor-agent mcp`). Each one sends the session log first (the governor judges the
// log it has), then calls the API of the calling agent's governor session. The tools that judge
// the workspace (begin, begin_code, verify, code_verify) go through `session.judge`, which in
// snapshot mode uploads the workspace first and hands the request the tree to name.

const OBJECTIVE = { type: 'string', description: 'What the user asked for, as you understand it (at most 4096 UTF-8 bytes).' }
const CLAIMS = {
  type: 'array',
  description: 'Success claims: {id, statement, importance: critical|important|minor, verification: '
    + 'deterministic|human-required|unsupported, check_ids: [check ids], minimum_independent_sources?}. '
    + 'At least one critical claim.',
  items: { type: 'object' },
}
const CHECKS = {
  type: 'array',
  description: 'Deterministic checks, each {id, kind, ...}: file_exists/file_absent {path}; '
    + 'file_contains/file_not_contains/file_equals {path, text}; json_equals {path, pointer, value}; '
    + 'tool_succeeded {tool, arguments_contain?, min_count?}; tool_not_called {tool}; no_tool_errors {}; '
    + 'code_verification_succeeded {profile, min_count?}; changes_within {paths} (every path changed since the contract start matches a pattern); '
    + 'unchanged {paths} (none matches). Paths are relative to the workspace; patterns are git pathspec globs (tests/**, **/conftest.py). '
    + 'Each check\'s baseline (does it already pass before your work?) comes back in the assessment: a critical claim needs a check that fails now.',
  items: { type: 'object' },
}
const OUTCOME_PROFILE = {
  type: 'string',
  description: 'An outcome profile id from reliability_outcome_profiles: once delivery is certified the server watches whether the business goal is reached. Certification is not the goal achieved: never claim it before reliability_outcome_status says achieved.',
}
const PROTECTED_CHANGES = {
  type: 'array',
  items: { type: 'string' },
  description: 'Protected paths (tests and their configuration) this task must change, as patterns: shown to the reviewer first; only a person\'s review can open them, so refused when review is off.',
}
const INTENT = {
  type: 'object',
  description: 'Needed when review is required: {constraints, assumptions, non_goals, ambiguities}, each a short list of short strings.',
}
const MAX_ATTEMPTS = { type: 'integer', minimum: 1, maximum: 10, description: 'Repair budget, up to the project cap; omit for the cap.' }
const DRAFT_RECEIPT = { type: 'string', description: 'Only when the project drafts contracts with an auxiliary model: the draft receipt.' }
const WAIT = { type: 'integer', minimum: 0, maximum: 3600, description: 'How long to wait for a pending review, in seconds.' }
const KIND = { type: 'string', enum: ['general', 'code'], description: 'code: include the project\'s required verifier profiles' }

export const NEXT = {
  active: 'The contract is active. Do the work, then call reliability_verify; claim completion only after the answer is certified.',
  'review-pending': 'A human reviewer has not decided yet, so no contract is active: do not claim completion. Call reliability_status with wait_seconds to keep waiting.',
  'delivery-pending': 'Every check passed and a person is reviewing the delivered change: it is not certified yet, so do not claim completion. Call reliability_status with wait_seconds to wait for the decision.',
  'review-required': 'Coverage is not ready: fix the error findings of the assessment, then begin again.',
  'revision-requested': 'The reviewer asked for a revision: revise the proposal using the feedback and begin again.',
  rejected: 'The reviewer rejected the proposal: do not proceed as if it were approved; ask the user, or abstain.',
}

/** The contract body of assess and begin: only the fields that were given. */
function contractBody(args) {
  const body = { objective: args.objective, claims: args.claims ?? [], checks: args.checks ?? [] }
  for (const key of ['max_attempts', 'intent', 'draft_receipt', 'protected_changes', 'outcome_profile']) if (args[key] !== undefined) body[key] = args[key]
  return body
}

const object = (properties, required = []) => ({ type: 'object', properties, required, additionalProperties: false })
const withTree = (body, tree) => (tree ? { ...body, tree } : body)
/** Path sessions (and callers that judge nothing): the request with no tree. */
const noTree = (request) => request(undefined)

/**
 * @param {{reviewWaitSeconds: number}} options
 * @returns {Array<{name: string, description: string, parameters: object, run: (args: any, session: {id: string, client: any, judge?: (request: (tree?: string) => Promise<any>) => Promise<any>}) => Promise<unknown>}>}
 */
export function governorTools({ reviewWaitSeconds }) {
  async function waitForReview({ id, client }, limitSeconds) {
    const deadline = Date.now() + limitSeconds * 1000
    while (Date.now() < deadline) {
      const { review } = await client.review(id, Math.min(60, Math.ceil((deadline - Date.now()) / 1000)))
      if (!review || review.status !== 'pending') break
    }
    const status = await client.status(id)
    return { ...status, next: NEXT[status.state] ?? '' }
  }

  async function begin(route, args, session) {
    const answer = await (session.judge ?? noTree)((tree) => session.client.request('POST', `/sessions/${session.id}/${route}`, { body: withTree(contractBody(args), tree) }))
    const wait = args.wait_seconds ?? reviewWaitSeconds
    if (answer.status === 'review-pending' && wait > 0) {
      return { ...(await waitForReview(session, wait)), assessment: answer.assessment }
    }
    return { ...answer, next: NEXT[answer.status] ?? '' }
  }

  return [
    {
      name: 'reliability_assess',
      description: 'Preview the coverage of a proposed completion contract: findings (errors block begin) and scores. Writes nothing.',
      parameters: object({ objective: OBJECTIVE, claims: CLAIMS, checks: CHECKS, max_attempts: MAX_ATTEMPTS, intent: INTENT, kind: KIND }, ['objective', 'claims', 'checks']),
      run: (args, { id, client }) => client.request('POST', `/sessions/${id}/assess${args.kind === 'code' ? '?kind=code' : ''}`, { body: contractBody(args) }),
    },
    {
      name: 'reliability_begin',
      description: 'Propose a completion contract. With review off it is active at once; with review required this waits for the reviewer up to wait_seconds, then returns the decision or the pending state.',
      parameters: object({ objective: OBJECTIVE, claims: CLAIMS, checks: CHECKS, max_attempts: MAX_ATTEMPTS, intent: INTENT, draft_receipt: DRAFT_RECEIPT, protected_changes: PROTECTED_CHANGES, outcome_profile: OUTCOME_PROFILE, wait_seconds: WAIT }, ['objective', 'claims', 'checks']),
      run: (args, session) => begin('contracts', args, session),
    },
    {
      name: 'reliability_begin_code',
      description: 'Propose a code contract: the project\'s required verifier profiles are added as checks under a critical claim; add your own claims and checks for the rest. Waits for review like reliability_begin.',
      parameters: object({ objective: OBJECTIVE, claims: CLAIMS, checks: CHECKS, max_attempts: MAX_ATTEMPTS, intent: INTENT, draft_receipt: DRAFT_RECEIPT, protected_changes: PROTECTED_CHANGES, outcome_profile: OUTCOME_PROFILE, wait_seconds: WAIT }, ['objective']),
      run: (args, session) => begin('code-contracts', args, session),
    },
    {
      name: 'reliability_draft',
      description: 'Have the project\'s auxiliary model draft the claims and checks (projects in auxiliary-model mode: a contract can then only be begun from such a draft, exactly as drafted).',
      parameters: object({ objective: OBJECTIVE, contract_kind: KIND, context: { type: 'string', description: 'Background for the drafting model; never stored.' } }, ['objective', 'contract_kind']),
      run: (args, { id, client }) => client.request('POST', `/sessions/${id}/drafts`, {
        body: { objective: args.objective, contract_kind: args.contract_kind, ...(args.context === undefined ? {} : { context: args.context }) },
      }),
    },
    {
      name: 'reliability_verify',
      description: 'Evaluate every check of the active contract now (one attempt of the repair budget): repair (with the failed checks), certified, or exhausted.',
      parameters: object({}),
      run: (_args, { id, client, judge = noTree }) => judge((tree) => client.request('POST', `/sessions/${id}/verify`, { body: withTree({}, tree) })),
    },
    {
      name: 'reliability_status',
      description: 'The session\'s state (idle, review-pending, active, delivery-pending, certified, exhausted, abstained), contract, attempts, terminal and review.',
      parameters: object({ wait_seconds: { ...WAIT, description: 'When a review is pending, wait this long for the decision first.' } }),
      run: async (args, session) => {
        const status = await session.client.status(session.id)
        const waiting = status.state === 'review-pending' || status.state === 'delivery-pending'
        if (waiting && (args.wait_seconds ?? 0) > 0) return waitForReview(session, args.wait_seconds)
        return { ...status, next: NEXT[status.state] ?? '' }
      },
    },
    {
      name: 'reliability_abstain',
      description: 'End the contract honestly without success when proof is unavailable.',
      parameters: object({ reason: { type: 'string', minLength: 1, maxLength: 2000, description: 'Why completion cannot be proven.' } }, ['reason']),
      run: (args, { id, client }) => client.request('POST', `/sessions/${id}/abstain`, { body: { reason: args.reason } }),
    },
    {
      name: 'reliability_code_profiles',
      description: 'The trusted verifier profiles you may run by name. Commands are configured by operators, never by you.',
      parameters: object({}),
      run: (_args, { client }) => client.request('GET', '/code-profiles'),
    },
    {
      name: 'reliability_code_verify',
      description: 'Run a trusted verifier profile in the sandbox against the workspace and wait for its result (passed, failure kind, exit code; never the raw output). Run it after your last edit.',
      parameters: object({ profile: { type: 'string', description: 'A profile id from reliability_code_profiles' }, wait_seconds: { ...WAIT, description: 'How long to wait for the run to finish.' } }, ['profile']),
      run: async (args, { id, client, judge = noTree }) => {
        let run = await judge((tree) => client.request('POST', `/sessions/${id}/code-verifications`, { body: withTree({ profile: args.profile }, tree) }))
        const deadline = Date.now() + (args.wait_seconds ?? 300) * 1000
        while (run.state !== 'finished' && Date.now() < deadline) {
          run = await client.codeVerification(run.id, Math.min(60, Math.ceil((deadline - Date.now()) / 1000)))
        }
        return run
      },
    },
    {
      name: 'reliability_outcome_profiles',
      description: 'The outcome profiles you may name as outcome_profile when you begin: the business metric, its target and guardrails, the window and the attribution. The probe\'s command is the operator\'s, never yours.',
      parameters: object({}),
      run: (_args, { client }) => client.request('GET', '/outcome-profiles'),
    },
    {
      name: 'reliability_outcome_observe',
      description: 'Ask the server to observe the outcome now (at most once a minute; the server also observes on its own schedule). A worker runs the probe; returns the outcome status with the new observation, or with "pending" when the probe had not answered within a minute (reliability_outcome_status shows it later).',
      parameters: object({}),
      run: (_args, { id, client }) => client.request('POST', `/sessions/${id}/outcome/observations?wait=60`,
        { body: {}, timeoutMs: 70_000 }),
    },
    {
      name: 'reliability_outcome_status',
      description: 'The outcome after delivery: observing, achieved, missed, inconclusive or expired, with the observations and the signed terminal. Claim a business result only as the terminal states it ("correlated with" unless its attribution permits more).',
      parameters: object({}),
      run: (_args, { id, client }) => client.request('GET', `/sessions/${id}/outcome`),
    },
  ]
}
