// Entry of the tokenizer worker thread (engine/tokenizer_worker.ts starts it): loads the tokenizer of
// workerData.tokenizerPath and encodes texts on request, so that the HTTP thread never runs the BPE. Holds no state
// besides the tokenizer; requests are answered one at a time, in order.
import { parentPort, workerData } from 'node:worker_threads';
import { loadTokenizer, type Tokenizer } from '../tokenizer/index.js';
import type { FromTokenizerMsg, ToTokenizerMsg, TokenizerWorkerData } from './messages.js';

const port = parentPort;
if (port) {
  let tokenizer: Tokenizer | null = null;
  try {
    tokenizer = loadTokenizer((workerData as TokenizerWorkerData).tokenizerPath);
    port.postMessage({ type: 'ready' } satisfies FromTokenizerMsg);
  } catch (e) {
    port.postMessage({ type: 'init_error', message: (e as Error).message } satisfies FromTokenizerMsg);
  }
  const tok = tokenizer;
  if (tok) {
    port.on('message', (m: ToTokenizerMsg) => {
      let reply: FromTokenizerMsg;
      try {
        const ids = m.texts.map((t) => Int32Array.from(tok.encode(t, { addSpecialTokens: m.addSpecialTokens })));
        reply = { type: 'encoded', id: m.id, ids };
      } catch (e) {
        reply = { type: 'encode_error', id: m.id, message: `${(e as Error).name}: ${(e as Error).message}` };
      }
      port.postMessage(reply, reply.type === 'encoded' ? reply.ids.map((a) => a.buffer as ArrayBuffer) : []);
    });
  }
}
