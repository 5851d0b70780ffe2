import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ContextLengthExceededError, InternalError, InvalidRequestError, NotFoundError, OutOfKVCacheError, UnsupportedFeatureError } from '../common/index.js';
import { toHttpError, toGenerateHttpError, invalidJsonError, UNAUTHORIZED } from './http_errors.js';

test('error kinds map to SGLang status codes and the ErrorResponse body (param always null, as create_error_response leaves it)', () => {
  assert.deepEqual(toHttpError(new InvalidRequestError('bad temperature', 'temperature')), {
    status: 400, body: { object: 'error', message: 'bad temperature', type: 'BadRequestError', param: null, code: 400 },
  });
  assert.equal(JSON.stringify(toHttpError(new InvalidRequestError('x', 'x')).body), '{"object":"error","message":"x","type":"BadRequestError","param":null,"code":400}');
  assert.deepEqual(toHttpError(new InvalidRequestError('1 validation error: x', 'x'), true).body,
    { object: 'error', message: '1 validation error: x', type: 'Bad Request', param: null, code: 400 });
  assert.equal(toHttpError(new ContextLengthExceededError('too long')).status, 400);
  assert.equal(toHttpError(new UnsupportedFeatureError('nope')).status, 400);
  assert.equal(toHttpError(new NotFoundError('nope')).status, 404);
  assert.equal(toHttpError(new OutOfKVCacheError('full')).status, 503);
  assert.equal(toHttpError(new InternalError('bug')).status, 500);
  assert.deepEqual(toHttpError(new TypeError('x is undefined')).body, { object: 'error', message: 'x is undefined', type: 'InternalServerError', param: null, code: 500 });
  assert.deepEqual(toGenerateHttpError(new InvalidRequestError('Either text, input_ids or input_embeds should be provided.')),
    { status: 400, body: { error: { message: 'Either text, input_ids or input_embeds should be provided.' } } });
  assert.equal(invalidJsonError('Unexpected end').status, 400);
  assert.deepEqual(UNAUTHORIZED, { status: 401, body: { error: 'Unauthorized' } });
});
