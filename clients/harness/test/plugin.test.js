// The plugin against a real governor server. tests/harness_e2e/test_plugin_units.py starts one
// and runs this file with GOVERNOR_TEST_URL, GOVERNOR_TEST_TOKEN, GOVERNOR_TEST_WORKSPACES (a
// directory under the server's workspace roots) and GOVERNOR_TEST_EVENTS: the committed events
// of a real log the Harness wrote (tests/fixtures/harness/logs/dsh-0.1.0-rc.8), as a JSON array.

import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { test } from 'node:test'
import { ConfigError, EventStream, Governor, GovernorClient, resolveConfig } from '../lib/index.js'

const URL = process.env.GOVERNOR_TEST_URL
const TOKEN = process.env.GOVERNOR_TEST_TOKEN
const WORKSPACES = process.env.GOVERNOR_TEST_WORKSPACES
const EVENTS = process.env.GOVERNOR_TEST_EVENTS
if (!URL || !TOKEN || !WORKSPACES || !EVENTS) {
  throw new Error('run through tests/harness_e2e/test_plugin_units.py: it starts the governor these tests use')
}

function recordedEvents() {
  return JSON.parse(readFileSync(EVENTS, 'utf8'))
}

function workspace() {
  return mkdtempSync(join(WORKSPACES, 'ws-'))
}

const client = () => new GovernorClient({ url: URL, token: TOKEN })

/** A loopback port nothing listens on. */
async function deadUrl() {
  const server = createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return `http://127.0.0.1:${port}`
}

async function storedAgentEvents(sessionId) {
  const page = await client().request('GET', `/sessions/${sessionId}/events?limit=5000`)
  return page.events.filter((event) => event.origin !== 'governor')
}

function stream(options) {
  const id = `session-${randomUUID()}`
  return new EventStream({
    client: client(), dir: join(mkdtempSync(join(tmpdir(), 'spool-')), id), harnessSessionId: id,
    workspace: workspace(), header: { version: 0, id }, ...options,
  })
}

test('every event reaches the governor once and in order, also after the governor appended its own', async () => {
  const events = recordedEvents()
  const s = stream()
  for (const event of events.slice(0, 30)) s.push(event)
  assert.equal(await s.flush(10_000), null)
  s.state.nextSeq -= 1 // as after a verdict: the governor's next seq is not the one we know
  for (const event of events.slice(30)) s.push(event)
  assert.equal(await s.flush(10_000), null)
  const stored = await storedAgentEvents(s.state.sessionId)
  assert.deepEqual(stored.map((e) => e.meta.sourceSeq), events.map((e) => e.seq))
  assert.deepEqual(stored.map((e) => e.type), events.map((e) => e.type))
  const session = await client().status(s.state.sessionId)
  assert.equal(session.external_id, s.harnessSessionId)
})

test('with the governor down, pushing returns at once; a later process sends the spool in order', async () => {
  const events = recordedEvents()
  const down = stream({ client: new GovernorClient({ url: await deadUrl(), token: TOKEN }) })
  const started = performance.now()
  for (const event of events) down.push(event)
  assert.ok(performance.now() - started < 500, 'pushing waited for the network')
  const unsent = await down.flush(300)
  assert.match(unsent.message, /could not be reached/)
  assert.equal(readFileSync(join(down.dir, 'events.jsonl'), 'utf8').trim().split('\n').length, events.length)

  const later = new EventStream({ client: client(), dir: down.dir, harnessSessionId: down.harnessSessionId })
  assert.equal(later.queue.length, events.length)
  assert.equal(await later.flush(10_000), null)
  const stored = await storedAgentEvents(later.state.sessionId)
  assert.deepEqual(stored.map((e) => e.meta.sourceSeq), events.map((e) => e.seq))
})

test('a batch the governor stored but whose answer was lost is not stored twice', async () => {
  const events = recordedEvents()
  const s = stream()
  const sessionId = await s.session()
  s.client = new GovernorClient({ url: await deadUrl(), token: TOKEN })
  for (const event of events.slice(0, 20)) s.push(event)
  await s.flush(300) // the batch is on disk with its key, not acknowledged
  const { key, expectedSeq, count } = s.state.pending
  await client().appendEvents(sessionId, s.queue.slice(0, count), { expectedSeq, key }) // the answer "lost"
  const resumed = new EventStream({ client: client(), dir: s.dir, harnessSessionId: s.harnessSessionId })
  assert.equal(await resumed.flush(10_000), null)
  assert.equal((await storedAgentEvents(sessionId)).length, 20)
})

test('a session the governor refuses is not asked for again at every event, only at a flush', async () => {
  let creates = 0
  class Counting extends GovernorClient {
    createSession(options) {
      creates += 1
      return super.createSession(options)
    }
  }
  const s = stream({ client: new Counting({ url: URL, token: TOKEN }), workspace: tmpdir() }) // outside the roots
  const events = recordedEvents()
  s.push(events[0])
  const refused = await s.flush(5_000)
  assert.equal(refused.status, 422)
  assert.match(refused.message, /workspace/)
  for (const event of events.slice(1, 10)) s.push(event)
  await new Promise((resolve) => setTimeout(resolve, 200))
  assert.equal(creates, 1)
  assert.equal((await s.flush(5_000)).status, 422)
  assert.equal(creates, 2)
  assert.equal(s.queue.length, 10) // kept: nothing is dropped
})

/** What the Harness's agent offers a turn-stopping listener, recording the plugin's calls. */
function agentOf(session) {
  const calls = []
  return {
    calls,
    session,
    steer: (message) => calls.push(['steer', message]),
    inject: (message) => calls.push(['inject', message]),
  }
}

function governor(overrides = {}, token = TOKEN) {
  return new Governor(resolveConfig({ spoolDir: mkdtempSync(join(tmpdir(), 'spool-')), stopBudgetMs: 5_000, ...overrides },
    { GOVERNOR_URL: URL, GOVERNOR_TOKEN: token }), () => {})
}

test('a stop with a failing contract is steered with the governor\'s repair message', async () => {
  const g = governor()
  const cwd = workspace()
  const session = { header: { version: 0, id: `session-${randomUUID()}`, cwd } }
  const events = recordedEvents()
  for (const event of events.slice(0, 8)) g.onEvent(session, event) // the turn is open
  const begin = g.tools().find((tool) => tool.name === 'reliability_begin')
  const answer = await begin.execute({
    objective: 'Write hello.txt saying hello governor',
    claims: [{ id: 'c', statement: 'hello.txt says hello governor', importance: 'critical', verification: 'deterministic', check_ids: ['k'] }],
    checks: [{ id: 'k', kind: 'file_contains', path: 'hello.txt', text: 'hello governor' }],
  }, { agent: { session } })
  assert.equal(answer.status, 'active')
  const agent = agentOf(session)
  const outcome = await g.onTurnStopping({ agent })
  assert.equal(outcome.action, 'steer')
  assert.equal(agent.calls.length, 1)
  const [kind, message] = agent.calls[0]
  assert.equal(kind, 'steer')
  assert.deepEqual(message.source, { kind: 'plugin', plugin: 'reliability-governor' })
  assert.match(message.content[0].text, /^Completion is not verified yet: attempt 1\/3 failed 1 of 1 checks/)
})

test('under delivery review a passing attempt is not certified: the agent is told not to claim completion', async () => {
  const g = governor({}, process.env.GOVERNOR_TEST_DELIVERY_TOKEN)
  const cwd = mkdtempSync(join(process.env.GOVERNOR_TEST_DELIVERY_WORKSPACES, 'ws-'))
  const session = { header: { version: 0, id: `session-${randomUUID()}`, cwd } }
  const tool = (name) => g.tools().find((candidate) => candidate.name === name)
  const begun = await tool('reliability_begin').execute({
    objective: 'Write hello.txt saying hello governor',
    claims: [{ id: 'c', statement: 'hello.txt says hello governor', importance: 'critical', verification: 'deterministic', check_ids: ['k'] }],
    checks: [{ id: 'k', kind: 'file_contains', path: 'hello.txt', text: 'hello governor' }],
  }, { agent: { session } })
  assert.equal(begun.status, 'active')
  writeFileSync(join(cwd, 'hello.txt'), 'hello governor\n')
  const verified = await tool('reliability_verify').execute({}, { agent: { session } })
  assert.equal(verified.decision, 'delivery-pending')
  assert.equal(verified.terminal ?? null, null)
  const status = await tool('reliability_status').execute({}, { agent: { session } })
  assert.equal(status.state, 'delivery-pending')
  assert.match(status.next, /not certified yet, so do not claim completion/)
})

test('when the governor cannot be asked, two stops are steered with a clear message, the third is allowed unverified', async () => {
  const g = governor({ url: await deadUrl(), stopBudgetMs: 200 })
  const session = { header: { version: 0, id: `session-${randomUUID()}`, cwd: workspace() } }
  const agent = agentOf(session)
  const outcomes = []
  for (let stop = 0; stop < 3; stop++) outcomes.push((await g.onTurnStopping({ agent })).action)
  assert.deepEqual(outcomes, ['steer', 'steer', 'allow'])
  assert.deepEqual(agent.calls.map(([kind]) => kind), ['steer', 'steer', 'inject'])
  assert.match(agent.calls[0][1].content[0].text, /could not be asked whether this work is complete .*do not claim the task is complete/s)
  assert.match(agent.calls[2][1].content[0].text, /^Unverified: .*do not report the task as complete/s)
})

test('a governor refusal reaches the agent as the tool error, with the governor\'s code', async () => {
  const g = governor()
  const session = { header: { version: 0, id: `session-${randomUUID()}`, cwd: workspace() } }
  const verify = g.tools().find((tool) => tool.name === 'reliability_verify')
  await assert.rejects(verify.execute({}, { agent: { session } }), (error) => {
    const { error: refusal } = JSON.parse(error.message)
    assert.equal(refusal.status, 409)
    assert.equal(refusal.code, 'CONFLICT')
    return true
  })
  const profiles = g.tools().find((tool) => tool.name === 'reliability_code_profiles')
  assert.ok(Array.isArray((await profiles.execute({}, { agent: { session } })).profiles))
})

test('the agent gets the twelve governor tools under their original names', () => {
  assert.deepEqual(governor().tools().map((tool) => tool.name).sort(), [
    'reliability_abstain', 'reliability_assess', 'reliability_begin', 'reliability_begin_code',
    'reliability_code_profiles', 'reliability_code_verify', 'reliability_draft',
    'reliability_outcome_observe', 'reliability_outcome_profiles', 'reliability_outcome_status',
    'reliability_status', 'reliability_verify'])
})

test('a bad configuration is refused at load, naming the field and the reason', () => {
  const refused = (config, env) => {
    try {
      resolveConfig(config, env)
    } catch (error) {
      assert.ok(error instanceof ConfigError)
      return [error.field, error.message]
    }
    assert.fail('accepted')
  }
  const env = { GOVERNOR_URL: URL, GOVERNOR_TOKEN: TOKEN }
  assert.equal(refused({}, {})[0], 'url')
  assert.match(refused({ url: 'ftp://x' }, env)[1], /config\.url: must start with http/)
  assert.match(refused({ tokenEnv: 'MY_TOKEN' }, env)[1], /config\.tokenEnv: the environment variable MY_TOKEN holds no agent token/)
  assert.match(refused({ workspace: 'remote' }, env)[1], /config\.workspace: must be one of cwd, snapshot/)
  assert.equal(resolveConfig({ workspace: 'snapshot' }, env).workspace, 'snapshot')
  assert.match(refused({ stopBudgetMs: -1 }, env)[1], /config\.stopBudgetMs/)
  assert.equal(resolveConfig({ tokenEnv: 'MY_TOKEN' }, { ...env, MY_TOKEN: 'gov_x' }).token, 'gov_x')
})
