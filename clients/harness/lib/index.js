// Reliability Governor plugin for the DeepSeek Harness (a Cordis plugin).
//
// - Every committed event of a Harness session (`session/event`) is spooled and streamed to the
//   governor session whose external id is the Harness session id (created on the session's first
//   event, bound to the session's cwd).
// - At `agent/turn-stopping` the log is flushed and the governor's `turn-stop` decides: a steer
//   runs another step with the governor's message. When the governor cannot be asked, the stop is
//   steered with a message that says so, at most twice in a row; the next stop is allowed, with a
//   notice that nothing was verified.
// - The governor's tools (reliability_*) are registered for the agent.
// - With `workspace: snapshot` the governor shares no disk with the agent (rules §11): the
//   session is bound {"kind": "snapshot"}, the cwd is uploaded as a snapshot after each tool
//   result (in the background, one upload at a time) and before each stop and each tool that
//   judges the workspace, which then names the tree uploaded.

import { existsSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { GovernorClient, GovernorError, describe } from './client.js'
import { EventStream } from './stream.js'
import { governorTools } from './tools.js'
import { uploadSnapshot } from './snapshot.js'

export { GovernorClient, GovernorError } from './client.js'
export { blobId, hashTree, TreeError, uploadSnapshot } from './snapshot.js'
export { EventStream, envelope } from './stream.js'
export { governorTools } from './tools.js'

export const name = 'reliability-governor'
export const inject = ['tools']

export const PLUGIN_SOURCE = { kind: 'plugin', plugin: 'reliability-governor' }
export const UNASKED_STOPS_ALLOWED_AT = 3
const WORKSPACE_MODES = ['cwd', 'snapshot']
export const UPLOAD_IN_PROGRESS = 'UPLOAD_IN_PROGRESS'

/** A configuration refused at load, naming the field and the reason. */
export class ConfigError extends Error {
  constructor(field, reason) {
    super(`reliability-governor: config.${field}: ${reason}`)
    this.name = 'ConfigError'
    this.field = field
  }
}

/**
 * The plugin's settings from its Cordis config, with the environment for what the config leaves
 * out. The token itself is never in the config: only the name of the variable that holds it.
 * @param {import('./index.d.ts').Config} config
 * @param {Record<string, string | undefined>} env
 * @returns {import('./index.d.ts').ResolvedConfig}
 */
export function resolveConfig(config = {}, env = process.env) {
  const url = String(config.url ?? env.GOVERNOR_URL ?? '').trim()
  if (!url) throw new ConfigError('url', 'not set, and GOVERNOR_URL is not set either (e.g. http://127.0.0.1:8000)')
  if (!/^https?:\/\//.test(url)) throw new ConfigError('url', `must start with http:// or https://: ${JSON.stringify(url)}`)
  const tokenEnv = config.tokenEnv ?? 'GOVERNOR_TOKEN'
  if (typeof tokenEnv !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(tokenEnv)) {
    throw new ConfigError('tokenEnv', `must be the name of an environment variable: ${JSON.stringify(tokenEnv)}`)
  }
  const token = (env[tokenEnv] ?? '').trim()
  if (!token) throw new ConfigError('tokenEnv', `the environment variable ${tokenEnv} holds no agent token`)
  const workspace = config.workspace ?? 'cwd'
  if (!WORKSPACE_MODES.includes(workspace)) {
    throw new ConfigError('workspace', `must be one of ${WORKSPACE_MODES.join(', ')}: ${JSON.stringify(workspace)}`)
  }
  const positive = (field, fallback) => {
    const value = config[field] ?? fallback
    if (!Number.isInteger(value) || value < 0) throw new ConfigError(field, `must be a non-negative integer: ${JSON.stringify(value)}`)
    return value
  }
  const dshHome = env.DSH_HOME || join(homedir(), '.dsh')
  return {
    url, token, workspace,
    spoolDir: config.spoolDir ?? join(dshHome, 'reliability-governor', 'spool'),
    stopBudgetMs: positive('stopBudgetMs', 20_000),
    reviewWaitSeconds: positive('reviewWaitSeconds', 300),
  }
}

/** A user message from the plugin: how a steer reaches the agent. */
export function pluginMessage(text) {
  return { role: 'user', id: randomUUID(), content: [{ type: 'text', text }], source: PLUGIN_SOURCE }
}

/**
 * The snapshots of one Harness session's cwd (workspace: snapshot). Uploads run one at a time,
 * in order; a judgement (`withTree`) uploads and then makes its request with nothing in between,
 * so the tree it names is still the session's latest snapshot.
 */
export class Snapshots {
  /**
   * @param {{client: GovernorClient, root: string, file: string, sessionId: () => Promise<string>, log?: (line: string) => void}} options
   */
  constructor({ client, root, file, sessionId, log = () => {} }) {
    this.client = client
    this.root = root
    this.file = file
    this.sessionId = sessionId
    this.log = log
    this.tail = Promise.resolve()
    this.queued = false
  }

  enqueue(task) {
    const run = this.tail.then(task)
    this.tail = run.catch(() => {})
    return run
  }

  /** Upload the cwd as the newest snapshot (only what changed since the last one). */
  async upload() {
    const sessionId = await this.sessionId()
    let last = null
    try {
      last = JSON.parse(readFileSync(this.file, 'utf8'))
    } catch {
      last = null
    }
    const answer = await uploadSnapshot({ client: this.client, sessionId, root: this.root, last })
    if (!answer.unchanged) {
      writeFileSync(`${this.file}.tmp`, JSON.stringify(answer.last))
      renameSync(`${this.file}.tmp`, this.file)
    }
    return answer
  }

  /** After a tool result: upload in the background, so a stop sends only the remainder. */
  background() {
    if (this.queued) return
    this.queued = true
    this.enqueue(() => {
      this.queued = false
      return this.upload()
    }).catch((error) => this.log(`reliability-governor: background snapshot upload: ${describe(error)}`))
  }

  /**
   * Upload, then `request(tree)`. With `budgetMs`, an upload not finished by then is left to go
   * on in the background and this rejects with "upload in progress" (the request is not made).
   */
  withTree(request, budgetMs) {
    let abandoned = false
    let uploaded
    const treeKnown = new Promise((resolve) => { uploaded = resolve })
    const run = this.enqueue(async () => {
      const { tree } = await this.upload()
      if (abandoned) return undefined
      uploaded()
      return request(tree)
    })
    if (budgetMs === undefined) return run
    run.catch(() => {}) // when abandoned, nobody awaits it
    let timer
    const late = new Promise((resolve) => { timer = setTimeout(() => resolve('late'), Math.max(0, budgetMs)) })
    return Promise.race([treeKnown, run, late]).then((first) => {
      clearTimeout(timer)
      if (first !== 'late') return run // the request, once made, is awaited whatever the budget
      abandoned = true
      throw new GovernorError(`upload in progress: the workspace snapshot could not be uploaded within the stop budget (${budgetMs} ms); it goes on in the background`,
        { code: UPLOAD_IN_PROGRESS })
    }, (error) => {
      clearTimeout(timer)
      throw error
    })
  }
}

export class Governor {
  /**
   * @param {import('./index.d.ts').ResolvedConfig} config
   * @param {(line: string) => void} [log]
   */
  constructor(config, log = (line) => process.stderr.write(line + '\n')) {
    this.config = config
    this.log = log
    this.client = new GovernorClient({ url: config.url, token: config.token })
    /** @type {Map<string, EventStream>} */
    this.streams = new Map()
    /** Stops in a row at which the governor could not be asked, per Harness session. */
    this.unasked = new Map()
    /** @type {Map<string, Snapshots>} */
    this.snapshots = new Map()
  }

  get snapshotMode() {
    return this.config.workspace === 'snapshot'
  }

  /** The stream of a Harness session (`session.header`: {id, cwd, …}). */
  streamOf(session) {
    const header = session.header
    let stream = this.streams.get(header.id)
    if (!stream) {
      stream = new EventStream({
        client: this.client, dir: join(this.config.spoolDir, header.id), harnessSessionId: header.id,
        workspace: this.snapshotMode ? { kind: 'snapshot' } : header.cwd, header: { ...header }, log: this.log,
      })
      this.streams.set(header.id, stream)
    }
    return stream
  }

  /** The snapshots of a Harness session's cwd (snapshot mode). */
  snapshotsOf(session) {
    const header = session.header
    let snapshots = this.snapshots.get(header.id)
    if (!snapshots) {
      const stream = this.streamOf(session)
      snapshots = new Snapshots({
        client: this.client, root: header.cwd, file: join(this.config.spoolDir, header.id, 'snapshot.json'),
        sessionId: () => stream.session(), log: this.log,
      })
      this.snapshots.set(header.id, snapshots)
    }
    return snapshots
  }

  /**
   * `request(tree)` for a request that judges the workspace: in snapshot mode after uploading
   * it (within `budgetMs` when given), else with no tree.
   */
  judge(session, request, budgetMs) {
    return this.snapshotMode ? this.snapshotsOf(session).withTree(request, budgetMs) : request(undefined)
  }

  /** Finish sending what earlier processes spooled and could not send. */
  resumeSpools() {
    if (!existsSync(this.config.spoolDir)) return
    for (const id of readdirSync(this.config.spoolDir)) {
      if (!existsSync(join(this.config.spoolDir, id, 'state.json')) || this.streams.has(id)) continue
      const stream = new EventStream({ client: this.client, dir: join(this.config.spoolDir, id), harnessSessionId: id, log: this.log })
      this.streams.set(id, stream)
      if (!stream.drained || stream.state.pending) stream.kick()
    }
  }

  /** `session/event`: spool the committed event; never waits, never throws into the Harness. */
  onEvent(session, event) {
    try {
      this.streamOf(session).push(event)
      if (this.snapshotMode && event?.type === 'tool/result') this.snapshotsOf(session).background()
    } catch (error) {
      this.log(`reliability-governor: an event could not be spooled: ${describe(error)}`)
    }
  }

  /**
   * `agent/turn-stopping`: flush, ask `turn-stop`, steer when told to.
   * @returns {Promise<{action: 'allow' | 'steer', message: string}>} what was done (for tests)
   */
  async onTurnStopping({ agent }) {
    const id = agent.session.header.id
    const stream = this.streamOf(agent.session)
    let answer
    try {
      const deadline = Date.now() + this.config.stopBudgetMs
      const unsent = await stream.flush(this.config.stopBudgetMs)
      if (unsent) throw unsent
      const sessionId = await stream.session()
      answer = await this.judge(agent.session, (tree) => this.client.turnStop(sessionId, tree), deadline - Date.now())
    } catch (error) {
      return this.stopWithoutGovernor(agent, id, error)
    }
    this.unasked.set(id, 0)
    if (answer.action === 'steer') {
      agent.steer(pluginMessage(answer.message))
      return { action: 'steer', message: answer.message }
    }
    return { action: 'allow', message: answer.message ?? '' }
  }

  stopWithoutGovernor(agent, id, error) {
    const count = (this.unasked.get(id) ?? 0) + 1
    this.unasked.set(id, count >= UNASKED_STOPS_ALLOWED_AT ? 0 : count)
    if (count >= UNASKED_STOPS_ALLOWED_AT) {
      const message = `Unverified: the Reliability Governor could not be asked (${describe(error)}) at ${count} `
        + 'stops in a row, so this stop is allowed without verification. Nothing in this session is verified: '
        + 'do not report the task as complete.'
      agent.inject(pluginMessage(message))
      this.log(`reliability-governor: ${message}`)
      return { action: 'allow', message }
    }
    const message = `The Reliability Governor could not be asked whether this work is complete (${describe(error)}). `
      + 'Completion cannot be verified now, so do not claim the task is complete. Tell the user that '
      + 'verification is unavailable and what remains unverified; stop again to have the checks evaluated '
      + `once the governor answers. (Unverified stop ${count} in a row; stop ${UNASKED_STOPS_ALLOWED_AT} is allowed, marked unverified.)`
    agent.steer(pluginMessage(message))
    return { action: 'steer', message }
  }

  /** Harness tool definitions: each flushes the log, then calls the governor. */
  tools() {
    return governorTools({ reviewWaitSeconds: this.config.reviewWaitSeconds }).map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      output: {
        schema: { type: 'object' },
        render: (_args, value) => [{ type: 'text', text: JSON.stringify(value, null, 2) }],
      },
      execute: async (args, exec) => {
        if (!exec.agent) throw new Error(`${tool.name} needs the calling agent's session`)
        const stream = this.streamOf(exec.agent.session)
        const unsent = await stream.flush(this.config.stopBudgetMs)
        if (unsent) throw new Error(`${tool.name}: the session log could not be sent to the governor: ${unsent.message}`)
        try {
          const judge = (request) => this.judge(exec.agent.session, request)
          return await tool.run(args ?? {}, { id: await stream.session(), client: this.client, judge })
        } catch (error) {
          if (!(error instanceof GovernorError)) throw error
          throw new Error(JSON.stringify({ error: { status: error.status, code: error.code, message: error.message, details: error.details } }))
        }
      },
    }))
  }
}

/**
 * Cordis entry point.
 * @param {any} ctx
 * @param {import('./index.d.ts').Config} config
 */
export function apply(ctx, config) {
  const governor = new Governor(resolveConfig(config))
  governor.resumeSpools()
  ctx.on('session/event', (session, event) => governor.onEvent(session, event))
  ctx.on('agent/turn-stopping', async (payload) => { await governor.onTurnStopping(payload) })
  for (const tool of governor.tools()) ctx.tools.register(tool)
}
