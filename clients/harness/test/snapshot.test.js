// The plugin's snapshot mode (`workspace: snapshot`, rules §11) against a real governor that
// cannot see the agent's directory: the directories here are made under the system's temporary
// directory, outside the server's workspace roots. Run by tests/harness_e2e/test_plugin_units.py
// (see plugin.test.js for the environment).

import assert from 'node:assert/strict'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { test } from 'node:test'
import { Governor, GovernorClient, hashTree, resolveConfig, uploadSnapshot } from '../lib/index.js'

const URL = process.env.GOVERNOR_TEST_URL
const TOKEN = process.env.GOVERNOR_TEST_TOKEN
const EVENTS = process.env.GOVERNOR_TEST_EVENTS
if (!URL || !TOKEN || !EVENTS) {
  throw new Error('run through tests/harness_e2e/test_plugin_units.py: it starts the governor these tests use')
}

/** A directory on "another machine": under none of the governor's workspace roots. */
function laptop() {
  const root = mkdtempSync(join(tmpdir(), 'laptop-'))
  mkdirSync(join(root, 'src', 'ünï'), { recursive: true })
  for (let i = 0; i < 12; i++) writeFileSync(join(root, 'src', `m${i}.js`), `export const value = ${i}\n`)
  writeFileSync(join(root, 'src', 'ünï', 'ß.txt'), 'straße\n')
  writeFileSync(join(root, 'empty'), '')
  writeFileSync(join(root, 'run.sh'), '#!/bin/sh\necho run\n')
  chmodSync(join(root, 'run.sh'), 0o755)
  symlinkSync('src/m0.js', join(root, 'main.js'))
  symlinkSync('../../../etc/passwd', join(root, 'outside'))
  mkdirSync(join(root, '.git'))
  writeFileSync(join(root, '.git', 'HEAD'), 'ref: refs/heads/main\n') // the agent's own repository: never part of the tree
  return root
}

/** A client that counts the blobs and snapshots it sends (every request still goes to the governor). */
class Counting extends GovernorClient {
  constructor(options) {
    super(options)
    this.puts = [] // every blob sent
    this.requests = [] // [PUT or POST, how many blobs]
    this.snapshots = []
  }

  putBlob(blob, data) {
    this.puts.push(blob)
    this.requests.push(['PUT', 1])
    return super.putBlob(blob, data)
  }

  putBlobs(blobs) {
    this.puts.push(...blobs.map(([blob]) => blob))
    this.requests.push(['POST', blobs.length])
    return super.putBlobs(blobs)
  }

  createSnapshot(sessionId, entries, base) {
    this.snapshots.push({ entries, base })
    return super.createSnapshot(sessionId, entries, base)
  }
}

async function snapshotSession(client) {
  return (await client.createSession({ externalId: `snapshot-${randomUUID()}`, workspace: { kind: 'snapshot' } })).id
}

test('only the blobs the governor lacks are sent, and a small change is sent as the change over the last snapshot', async () => {
  const root = laptop()
  const client = new Counting({ url: URL, token: TOKEN })
  const sessionId = await snapshotSession(client)
  const first = await uploadSnapshot({ client, sessionId, root })
  const local = await hashTree(root)
  assert.equal(first.tree, local.id) // the governor computed the tree id the plugin computed
  assert.equal(first.files, 17)
  assert.equal(new Set(client.puts).size, client.puts.length)
  assert.ok(client.puts.length <= 17)
  assert.ok(!first.last.entries['.git/HEAD'])
  assert.deepEqual(first.last.entries['run.sh'][0], '100755')
  assert.deepEqual(first.last.entries['outside'][0], '120000')

  writeFileSync(join(root, 'src', 'm7.js'), 'export const value = "changed"\n')
  client.puts.length = 0
  const second = await uploadSnapshot({ client, sessionId, root, last: first.last })
  assert.equal(second.tree, (await hashTree(root)).id)
  assert.equal(second.sentBlobs, 1)
  assert.equal(client.puts.length, 1)
  const sent = client.snapshots.at(-1)
  assert.equal(sent.base, first.tree)
  assert.deepEqual(sent.entries.map((e) => e.path), ['src/m7.js'])

  client.puts.length = 0
  const again = await uploadSnapshot({ client, sessionId, root, last: second.last })
  assert.equal(again.unchanged, true)
  assert.equal(client.puts.length, 0)

  // A large file goes alone by PUT, small ones together in one POST /blobs.
  writeFileSync(join(root, 'large.bin'), Buffer.alloc(1024 * 1024 + 1, `large ${randomUUID()}`))
  writeFileSync(join(root, 'small-1.txt'), `small ${randomUUID()}\n`)
  writeFileSync(join(root, 'small-2.txt'), `small ${randomUUID()}\n`)
  client.requests.length = 0
  const third = await uploadSnapshot({ client, sessionId, root, last: again.last })
  assert.equal(third.sentBlobs, 3)
  assert.deepEqual(client.requests.sort(), [['POST', 2], ['PUT', 1]])

  // Another session of the project: the blobs are in the project's store already.
  const other = await uploadSnapshot({ client, sessionId: await snapshotSession(client), root })
  assert.equal(other.tree, third.tree)
  assert.equal(other.sentBlobs, 0)
})

/** What the Harness's agent offers a turn-stopping listener, recording the plugin's calls. */
function agentOf(session) {
  const calls = []
  return { calls, session, steer: (m) => calls.push(['steer', m]), inject: (m) => calls.push(['inject', m]) }
}

function governor(overrides = {}) {
  return new Governor(resolveConfig({ spoolDir: mkdtempSync(join(tmpdir(), 'spool-')), stopBudgetMs: 10_000, workspace: 'snapshot', ...overrides },
    { GOVERNOR_URL: URL, GOVERNOR_TOKEN: TOKEN }), () => {})
}

const CONTRACT = {
  objective: 'Write hello.txt saying hello governor',
  claims: [{ id: 'c', statement: 'hello.txt says hello governor', importance: 'critical', verification: 'deterministic', check_ids: ['k'] }],
  checks: [{ id: 'k', kind: 'file_contains', path: 'hello.txt', text: 'hello governor' }],
  wait_seconds: 0,
}

test('in snapshot mode a session the governor cannot see is bound to snapshots, steered, repaired and certified', async () => {
  const g = governor()
  const cwd = laptop()
  const session = { header: { version: 0, id: `session-${randomUUID()}`, cwd } }
  const events = JSON.parse(readFileSync(EVENTS, 'utf8'))
  for (const event of events.slice(0, 8)) g.onEvent(session, event) // the turn is open
  const tool = (name) => g.tools().find((t) => t.name === name)
  const begun = await tool('reliability_begin').execute(CONTRACT, { agent: { session } })
  assert.equal(begun.status, 'active')
  const sessionId = await g.streamOf(session).session()
  const status = await g.client.status(sessionId)
  assert.deepEqual(status.workspace.kind, 'snapshot')

  const agent = agentOf(session)
  const stop = await g.onTurnStopping({ agent })
  assert.equal(stop.action, 'steer')
  assert.match(stop.message, /^Completion is not verified yet: attempt 1\/3 failed 1 of 1 checks/)

  writeFileSync(join(cwd, 'hello.txt'), 'hello governor\n')
  const verified = await tool('reliability_verify').execute({}, { agent: { session } })
  assert.equal(verified.decision, 'certified', JSON.stringify(verified))
  const after = await g.client.status(sessionId)
  assert.equal(after.state, 'certified')
  assert.deepEqual(after.attempts.map((a) => a.passed), [false, true])
})

test('an upload that does not finish within the stop budget steers the stop with "upload in progress", counted as unasked', async () => {
  const g = governor({ stopBudgetMs: 400 })
  class Slow extends GovernorClient {
    async putBlobs(blobs) {
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      return super.putBlobs(blobs)
    }
  }
  g.client = new Slow({ url: URL, token: TOKEN })
  const cwd = laptop()
  writeFileSync(join(cwd, 'unique.txt'), `never uploaded before: ${randomUUID()}\n`)
  const session = { header: { version: 0, id: `session-${randomUUID()}`, cwd } }
  await g.streamOf(session).session() // the session exists before the budget starts
  const agent = agentOf(session)
  const first = await g.onTurnStopping({ agent })
  assert.equal(first.action, 'steer')
  assert.match(first.message, /could not be asked whether this work is complete \(upload in progress: /)
  assert.match(first.message, /Unverified stop 1 in a row/)
  await g.snapshotsOf(session).tail // the upload went on in the background
  const second = await g.onTurnStopping({ agent }) // only the remainder (nothing) is left to send
  assert.equal(second.action, 'allow') // no contract: the governor allows it
  assert.equal(g.unasked.get(session.header.id), 0)
})

test('a tree the governor would refuse is refused before anything is sent, naming the path', async () => {
  const g = governor()
  const cwd = laptop()
  mkdirSync(join(cwd, 'vendor', '.git'), { recursive: true })
  const session = { header: { version: 0, id: `session-${randomUUID()}`, cwd } }
  const verify = g.tools().find((t) => t.name === 'reliability_verify')
  await assert.rejects(verify.execute({}, { agent: { session } }), (error) => {
    const { error: refusal } = JSON.parse(error.message)
    assert.equal(refusal.code, 'TREE')
    assert.match(refusal.message, /"vendor\/\.git": a nested \.git/)
    return true
  })
})
