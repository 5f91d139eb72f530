// The governor's agent API over fetch: one method per route the plugin uses.

export const API_PREFIX = '/api/v1'

/** A refusal or a failure to reach the governor. `status` is 0 when no answer came. */
export class GovernorError extends Error {
  /**
   * @param {string} message
   * @param {{status?: number, code?: string, details?: unknown}} [info]
   */
  constructor(message, { status = 0, code = 'UNREACHABLE', details } = {}) {
    super(message)
    this.name = 'GovernorError'
    this.status = status
    this.code = code
    this.details = details
  }

  /** Whether sending the same request again later may succeed. */
  get retryable() {
    return this.status === 0 || this.status === 429 || this.status >= 500
  }
}

export class GovernorClient {
  /**
   * @param {{url: string, token: string, timeoutMs?: number}} options
   */
  constructor({ url, token, timeoutMs = 10_000 }) {
    this.base = url.replace(/\/+$/, '').replace(/\/api\/v1$/, '') + API_PREFIX
    this.token = token
    this.timeoutMs = timeoutMs
  }

  /**
   * @param {string} method
   * @param {string} path
   * @param {{body?: unknown, raw?: Uint8Array, headers?: Record<string, string>, timeoutMs?: number}} [options]
   *   `body` is sent as JSON, `raw` as bytes (application/octet-stream)
   * @returns {Promise<any>}
   */
  async request(method, path, { body, raw, headers = {}, timeoutMs } = {}) {
    let response
    try {
      response = await fetch(this.base + path, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(raw === undefined ? {} : { 'content-type': 'application/octet-stream' }),
          ...headers,
        },
        body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
        signal: AbortSignal.timeout(timeoutMs ?? this.timeoutMs),
      })
    } catch (error) {
      throw new GovernorError(`the governor at ${this.base} could not be reached: ${describe(error)}`)
    }
    const text = await response.text().catch(() => '')
    let payload
    try {
      payload = text ? JSON.parse(text) : {}
    } catch {
      payload = { error: { code: 'BAD_RESPONSE', message: text.slice(0, 200) } }
    }
    if (!response.ok) {
      const error = payload?.error ?? {}
      throw new GovernorError(`${method} ${path}: ${response.status} ${error.code ?? ''} ${error.message ?? ''}`.trim(),
        { status: response.status, code: error.code ?? 'HTTP', details: error.details })
    }
    return payload
  }

  /**
   * Start (or find, by external id) the governor session of a Harness session, bound to a path
   * (a string) or to snapshots (`{kind: 'snapshot'}`).
   */
  createSession({ externalId, workspace, header }) {
    return this.request('POST', '/sessions', {
      body: { workspace: typeof workspace === 'string' ? { kind: 'path', path: workspace } : workspace, external_id: externalId, header },
    })
  }

  status(sessionId) {
    return this.request('GET', `/sessions/${sessionId}`)
  }

  appendEvents(sessionId, events, { expectedSeq, key }) {
    return this.request('POST', `/sessions/${sessionId}/events`, {
      body: { events, expected_seq: expectedSeq }, headers: { 'idempotency-key': key },
    })
  }

  /** `tree`: a snapshot session's latest snapshot (rules §11.3). */
  turnStop(sessionId, tree) {
    return this.request('POST', `/sessions/${sessionId}/turn-stop`, { body: tree ? { tree } : {} })
  }

  // --- snapshots (rules §11.1) ---

  /** The token's project: `tree_exclusions` and the caps a snapshot must keep. */
  project() {
    return this.request('GET', '/project')
  }

  async blobsMissing(blobs) {
    return (await this.request('POST', '/blobs/missing', { body: { blobs } })).missing
  }

  /** Store a blob (idempotent: 201 stored, 200 already there). */
  putBlob(blob, data) {
    return this.request('PUT', `/blobs/${blob}`, { raw: data, timeoutMs: Math.max(this.timeoutMs, 60_000) })
  }

  /**
   * Store many blobs in one request (`POST /blobs`: per blob a line `<id> <size>` then its bytes),
   * all or none, idempotent; `{stored, present}`.
   * @param {Array<[string, Uint8Array]>} blobs
   */
  putBlobs(blobs) {
    const body = Buffer.concat(blobs.flatMap(([blob, data]) => [Buffer.from(`${blob} ${data.length}\n`), data]))
    return this.request('POST', '/blobs', { raw: body, timeoutMs: Math.max(this.timeoutMs, 60_000) })
  }

  createSnapshot(sessionId, entries, base) {
    return this.request('POST', `/sessions/${sessionId}/snapshots`, { body: base ? { entries, base } : { entries } })
  }

  review(sessionId, waitSeconds) {
    return this.request('GET', `/sessions/${sessionId}/review?wait=${waitSeconds}`,
      { timeoutMs: (waitSeconds + 10) * 1000 })
  }

  codeVerification(runId, waitSeconds) {
    return this.request('GET', `/code-verifications/${runId}?wait=${waitSeconds}`,
      { timeoutMs: (waitSeconds + 10) * 1000 })
  }
}

/** @param {unknown} error */
export function describe(error) {
  if (error instanceof Error) {
    const cause = /** @type {any} */ (error).cause
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message
  }
  return String(error)
}
