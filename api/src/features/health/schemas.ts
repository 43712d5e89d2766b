import { component, Type } from '../../shapes.js';

export const HealthSchema = component('Health', Type.Object({ status: Type.Literal('ok') }));

export const ReadySchema = component(
  'Ready',
  Type.Object({ status: Type.Literal('ready'), checks: Type.Object({ mongo: Type.Literal('ok'), kafka: Type.Literal('ok') }) }),
);
