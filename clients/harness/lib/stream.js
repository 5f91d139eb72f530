// One Harness session's committed events, on their way to its governor session: spooled to disk
// as they are committed, sent in order in batches with `expected_seq`, retried until the governor
// takes them. Pushing never waits for the network.
//
// On disk, per Harness session (`<spool>/<session id>/`):
//   events.jsonl  every event pushed, one per line, in commit order
//   state.json    {sessionId, acked, nextSeq, pending, workspace, header}: the governor session,
//                 how many lines it has, the seq its next event gets, the batch in flight ({key,
//                 expectedSeq, count}) — written before the batch leaves, so a batch whose answer
//                 was lost is sent again under the same key and stored once — and what creates
//                 the governor session (so a later process can finish sending a spool).

import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { GovernorError, describe } from './client.js'

export const MAX_BATCH_EVENTS = 500
const ENVELOPE_KEYS = ['type', 'seq', 'time', 'data', 'ignorable', 'surfaceOp', 'sourceEventSeqs']
const RETRY_MIN_MS = 200
const RETRY_MAX_MS = 5_000

/** The governor's envelope of a committed Harness event: its known keys only. */
export function envelope(event) {
  const out = {}
  for (const key of ENVELOPE_KEYS) if (event[key] !== undefined) out[key] = event[key]
  return out
}

export class EventStream {
  /**
   * @param {{client: import('./client.js').GovernorClient, dir: string, harnessSessionId: string,
   *   workspace: string, header?: object, log?: (line: string) => void}} options
   */
  constructor({ client, dir, harnessSessionId, workspace, header, log = () => {} }) {
    this.client = client
    this.harnessSessionId = harnessSessionId
    this.log = log
    this.dir = dir
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    this.eventsFile = join(dir, 'events.jsonl')
    this.stateFile = join(dir, 'state.json')
    if (existsSync(this.stateFile)) {
      this.state = JSON.parse(readFileSync(this.stateFile, 'utf8'))
    } else {
      this.state = { sessionId: null, acked: 0, nextSeq: 0, pending: null, workspace, header }
      this.save()
    }
    const lines = existsSync(this.eventsFile)
      ? readFileSync(this.eventsFile, 'utf8').split('\n').filter(Boolean) : []
    /** Events pushed but not yet acknowledged, oldest first. */
    this.queue = lines.slice(this.state.acked).map((line) => JSON.parse(line))
    this.total = lines.length
    /** The last refusal that retrying cannot fix (cleared by the next success). */
    this.error = null
    this.running = null
    this.failures = 0
  }

  /** Spool one committed event and start sending it; returns at once. */
  push(event) {
    const kept = envelope(event)
    appendFileSync(this.eventsFile, JSON.stringify(kept) + '\n')
    this.total += 1
    this.queue.push(kept)
    // After a refusal only a flush (a stop, a governor tool) asks again, not every event.
    if (!this.error) this.kick()
  }

  /** Whether every pushed event has been acknowledged by the governor. */
  get drained() {
    return this.queue.length === 0
  }

  kick() {
    if (this.running === null) {
      this.running = this.pump().finally(() => { this.running = null })
    }
    return this.running
  }

  /**
   * Send everything spooled, waiting at most `budgetMs`. Resolves to null when the governor has
   * every event, else to the reason it does not (the events stay spooled and keep being sent).
   * @param {number} budgetMs
   * @returns {Promise<Error | null>}
   */
  async flush(budgetMs) {
    this.error = null
    const deadline = Date.now() + budgetMs
    while (!this.drained && Date.now() < deadline) {
      await Promise.race([this.kick(), sleep(Math.max(0, deadline - Date.now()))])
      if (this.error) return this.error
    }
    return this.drained ? null : (this.lastFailure ?? new GovernorError('the governor did not take the log in time'))
  }

  /** The governor session id, creating the session on first use. */
  async session() {
    if (!this.state.sessionId) {
      // One creation at a time: the event pump and a snapshot upload may both ask first.
      this.creating ??= this.client.createSession({
        externalId: this.harnessSessionId, workspace: this.state.workspace, header: this.state.header,
      }).finally(() => { this.creating = null })
      const created = await this.creating
      if (!this.state.sessionId) {
        this.state.sessionId = created.id
        this.state.nextSeq = created.next_seq
        this.save()
      }
    }
    return this.state.sessionId
  }

  async pump() {
    while (!this.drained || this.state.pending) {
      try {
        await this.sendOne()
        this.failures = 0
        this.lastFailure = null
      } catch (error) {
        const failure = error instanceof GovernorError ? error : new GovernorError(describe(error))
        this.lastFailure = failure
        if (!failure.retryable) {
          // The governor refused the log itself: sending it again cannot help. It stays spooled.
          this.error = failure
          this.log(`reliability-governor: the governor refused the session log: ${failure.message}`)
          return
        }
        this.failures += 1
        await sleep(Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (this.failures - 1)))
      }
    }
  }

  async sendOne() {
    const sessionId = await this.session()
    if (!this.state.pending) {
      const count = Math.min(this.queue.length, MAX_BATCH_EVENTS)
      const expectedSeq = this.state.nextSeq
      this.state.pending = {
        key: `dsh:${this.harnessSessionId}:${this.state.acked}:${expectedSeq}`, expectedSeq, count,
      }
      this.save()
    }
    const { key, expectedSeq, count } = this.state.pending
    let answer
    try {
      answer = await this.client.appendEvents(sessionId, this.queue.slice(0, count), { expectedSeq, key })
    } catch (error) {
      const nextSeq = error instanceof GovernorError && error.status === 409 ? error.details?.next_seq : undefined
      if (Number.isInteger(nextSeq)) {
        // The governor appended events of its own since (a verdict, a review): the same events
        // go again, after them.
        this.state.nextSeq = nextSeq
        this.state.pending = null
        this.save()
        return
      }
      throw error
    }
    this.queue.splice(0, count)
    this.state.acked += count
    this.state.nextSeq = answer.last_seq + 1
    this.state.pending = null
    this.save()
  }

  save() {
    const temporary = `${this.stateFile}.tmp`
    writeFileSync(temporary, JSON.stringify(this.state))
    renameSync(temporary, this.stateFile)
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.())
}
